#include "dist/data_groups.hpp"

#include "core/errors.hpp"
#include "dist/comm_mpi.hpp"
#if GPT_HAVE_CUDA
#include "dist/comm_nccl.hpp"
#endif

namespace gpt::dist {

namespace {

#if GPT_HAVE_CUDA
std::unique_ptr<Communicator> nccl_twin(Communicator& host, Stream compute) {
    auto* mpi = dynamic_cast<MpiCommunicator*>(&host);
    GPT_REQUIRE(mpi != nullptr, InternalError, "group '", host.name(), "' is not over MPI");
    return std::make_unique<NcclCommunicator>(mpi->comm(), host.name(), compute);
}
#endif

}  // namespace

DataGroups::DataGroups(ProcessGroups& groups, Kind kind, DeviceCopy copy, Stream compute)
    : groups_(groups), kind_(kind) {
    switch (kind) {
        case Kind::Host: break;
        case Kind::Staged: {
            GPT_REQUIRE(copy.to_host && copy.to_device, InternalError, "staged groups need copies");
            tp_ = std::make_unique<StagedCommunicator>(groups.tp(), copy);
            dp_ = std::make_unique<StagedCommunicator>(groups.dp(), copy);
            pp_ = std::make_unique<StagedCommunicator>(groups.pp(), copy);
            embedding_ = std::make_unique<StagedCommunicator>(groups.embedding(), copy);
            break;
        }
        case Kind::Nccl: {
#if GPT_HAVE_CUDA
            // Every rank creates the groups in the same order, so no NCCL initialisation
            // waits for a peer that is busy creating another group.
            tp_ = nccl_twin(groups.tp(), compute);
            dp_ = nccl_twin(groups.dp(), compute);
            pp_ = nccl_twin(groups.pp(), compute);
            embedding_ = nccl_twin(groups.embedding(), compute);
#else
            (void)compute;
            GPT_THROW(UsageError, "NCCL communicators need a build with CUDA");
#endif
            break;
        }
    }
}

DataGroups::~DataGroups() = default;

const char* data_groups_kind_name(DataGroups::Kind k) {
    switch (k) {
        case DataGroups::Kind::Host: return "MPI";
        case DataGroups::Kind::Staged: return "MPI, host-staged";
        case DataGroups::Kind::Nccl: return "NCCL";
    }
    return "?";
}

}  // namespace gpt::dist
