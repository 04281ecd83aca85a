// The communicators that carry backend memory -- activations, gradients, parameters -- as
// opposed to the host scalars (losses, norms, flags) that go over ProcessGroups' MPI
// communicators. On a host-memory backend they are those MPI communicators themselves; on
// a device they are NCCL twins of them (--distributed-backend nccl) or the same MPI
// communicators behind host staging (--distributed-backend mpi).
#pragma once

#include <memory>

#include "core/stream.hpp"
#include "dist/comm_staged.hpp"
#include "dist/communicator.hpp"
#include "dist/process_groups.hpp"

namespace gpt::dist {

class DataGroups {
public:
    enum class Kind { Host, Staged, Nccl };
    // Collective over every group (NCCL communicators are created here). `copy` is used by
    // Kind::Staged only; `compute`, the backend's stream the NCCL communicators order
    // against, by Kind::Nccl only.
    DataGroups(ProcessGroups& groups, Kind kind, DeviceCopy copy = {}, Stream compute = {});
    ~DataGroups();
    DataGroups(const DataGroups&) = delete;
    DataGroups& operator=(const DataGroups&) = delete;

    Kind kind() const { return kind_; }
    Communicator& tp() { return pick(tp_, groups_.tp()); }
    Communicator& dp() { return pick(dp_, groups_.dp()); }
    Communicator& pp() { return pick(pp_, groups_.pp()); }
    Communicator& embedding() { return pick(embedding_, groups_.embedding()); }

private:
    static Communicator& pick(const std::unique_ptr<Communicator>& own, Communicator& host) {
        return own ? *own : host;
    }
    ProcessGroups& groups_;
    Kind kind_;
    std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_;  // null: the host ones
};

const char* data_groups_kind_name(DataGroups::Kind k);

}  // namespace gpt::dist
