// The MPI communicators of one rank for every parallel group of Megatron's PTD-P layout,
// each wrapped in a Communicator. Passed explicitly to everything that communicates.
#pragma once

#include <mpi.h>

#include <memory>

#include "dist/communicator.hpp"
#include "dist/rank_grid.hpp"

namespace gpt::dist {

class ProcessGroups {
public:
    // Collective over `world`: splits it into the tp, dp, pp, model-parallel and embedding
    // groups of RankGrid(world size, tp, pp) and finds the node-local rank.
    ProcessGroups(MPI_Comm world, int tp_size, int pp_size);
    ~ProcessGroups();
    ProcessGroups(const ProcessGroups&) = delete;
    ProcessGroups& operator=(const ProcessGroups&) = delete;

    const RankGrid& grid() const { return grid_; }
    int rank() const { return rank_; }
    int world_size() const { return grid_.world_size(); }
    RankCoords coords() const { return grid_.coords(rank_); }
    bool is_first_stage() const { return coords().pp == 0; }
    bool is_last_stage() const { return coords().pp == grid_.pp_size() - 1; }
    int local_rank() const { return local_rank_; }  // rank among the processes of this node
    int local_size() const { return local_size_; }

    Communicator& world() { return *world_comm_; }
    Communicator& tp() { return *tp_; }
    Communicator& dp() { return *dp_; }
    Communicator& pp() { return *pp_; }
    Communicator& model_parallel() { return *mp_; }
    Communicator& embedding() { return *embedding_; }  // first + last stage; 1 rank if pp==1

    MPI_Comm world_mpi() const { return world_mpi_; }
    MPI_Comm dp_mpi() const { return dp_mpi_; }

private:
    RankGrid grid_;
    int rank_ = 0;
    int local_rank_ = 0;
    int local_size_ = 1;
    MPI_Comm world_mpi_ = MPI_COMM_NULL;
    MPI_Comm dp_mpi_ = MPI_COMM_NULL;
    std::unique_ptr<Communicator> world_comm_, tp_, dp_, pp_, mp_, embedding_;
};

}  // namespace gpt::dist
