#include "dist/process_groups.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "core/watchdog_deadline.hpp"
#include "dist/comm_mpi.hpp"

namespace gpt::dist {

namespace {

// Every rank passes the sorted member list of its own group; the smallest member is a
// color that is identical within a group and distinct across groups.
MPI_Comm split_by(MPI_Comm world, const std::vector<int>& members, int rank) {
    const int color = *std::min_element(members.begin(), members.end());
    const int key = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    MPI_Comm out = MPI_COMM_NULL;
    // Collective and blocking inside MPI: bounded by the watchdog's deadline monitor.
    watchdog::BlockedScope blocked("MPI_Comm_split (building the process groups)");
    if (MPI_Comm_split(world, color, key, &out) != MPI_SUCCESS)
        GPT_THROW(CommError, "MPI_Comm_split failed while building process groups");
    return out;
}

}  // namespace

ProcessGroups::ProcessGroups(MPI_Comm world, int tp_size, int pp_size)
    : grid_([&] {
          int size = 0;
          MPI_Comm_size(world, &size);
          return RankGrid(size, tp_size, pp_size);
      }()) {
    MPI_Comm_rank(world, &rank_);
    {
        watchdog::BlockedScope blocked("MPI_Comm_dup (the world group)");
        MPI_Comm_dup(world, &world_mpi_);
    }
    world_comm_ = std::make_unique<MpiCommunicator>(world_mpi_, "world");
    tp_ = std::make_unique<MpiCommunicator>(split_by(world, grid_.tp_group(rank_), rank_), "tp");
    dp_mpi_ = split_by(world, grid_.dp_group(rank_), rank_);
    dp_ = std::make_unique<MpiCommunicator>(dp_mpi_, "dp");
    pp_ = std::make_unique<MpiCommunicator>(split_by(world, grid_.pp_group(rank_), rank_), "pp");
    mp_ = std::make_unique<MpiCommunicator>(split_by(world, grid_.model_parallel_group(rank_), rank_),
                                            "model-parallel");
    // The embedding group is only meaningful on the first and last stage; middle stages
    // still take part in the split (MPI_Comm_split is collective) with their own color.
    std::vector<int> emb = grid_.embedding_group(rank_);
    const bool member = std::find(emb.begin(), emb.end(), rank_) != emb.end();
    embedding_ = std::make_unique<MpiCommunicator>(
        split_by(world, member ? emb : std::vector<int>{rank_}, rank_), "embedding");

    MPI_Comm node = MPI_COMM_NULL;
    {
        watchdog::BlockedScope blocked("MPI_Comm_split_type (the ranks of this node)");
        MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    }
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
}

ProcessGroups::~ProcessGroups() = default;

}  // namespace gpt::dist
