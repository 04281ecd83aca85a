// The memory a job may really use on this node. MemTotal is what the machine has; Slurm's
// --mem and containers limit a job through cgroups, and a rank planned against MemTotal is
// OOM-killed by the kernel without a word.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gpt::plan {

struct NodeMemory {
    std::uint64_t bytes = 0;  // the smallest limit found; 0: none found
    std::string source;       // e.g. "cgroup v2 memory.max (/sys/fs/cgroup/job_12/memory.max)"
};

// Where the limits are read from; tests point these at a fake tree.
struct MemorySources {
    std::string proc_root = "/proc";           // self/cgroup, meminfo
    std::string cgroup_root = "/sys/fs/cgroup";
    std::function<const char*(const char*)> getenv;  // empty: std::getenv
};

// The smallest of MemTotal, the cgroup v2 memory.max of this process's cgroup and its
// ancestors, the cgroup v1 memory.limit_in_bytes, SLURM_MEM_PER_NODE (MiB) and
// SLURM_MEM_PER_CPU (MiB) x SLURM_CPUS_ON_NODE, for the whole node (all its ranks).
NodeMemory node_memory_limit(const MemorySources& src = {});

}  // namespace gpt::plan
