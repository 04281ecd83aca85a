// Issue 20 section 5: the start-up memory check uses the job's real limit, the smallest of
// MemTotal, the cgroup v2 / v1 limits and Slurm's variables.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "plan/memory_limit.hpp"
#include "test_env.hpp"

using namespace gpt::plan;

namespace {

void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}

struct FakeNode {
    std::string root;
    std::map<std::string, std::string> env;
    explicit FakeNode(const std::string& name) : root(gpt::test::scratch_dir(name)) {
        write(root + "/proc/meminfo", "MemTotal:       16777216 kB\nMemFree: 1 kB\n");  // 16 GiB
    }
    NodeMemory limit() const {
        MemorySources s;
        s.proc_root = root + "/proc";
        s.cgroup_root = root + "/cg";
        s.getenv = [this](const char* n) -> const char* {
            auto it = env.find(n);
            return it == env.end() ? nullptr : it->second.c_str();
        };
        return node_memory_limit(s);
    }
};

constexpr std::uint64_t GiB = 1ull << 30;

}  // namespace

TEST(MemoryLimit, MemTotalWithoutOtherLimits) {
    FakeNode n("memlimit_plain");
    write(n.root + "/proc/self/cgroup", "0::/user.slice\n");
    write(n.root + "/cg/user.slice/memory.max", "max\n");
    EXPECT_EQ(n.limit().bytes, 16 * GiB);
    EXPECT_EQ(n.limit().source, "/proc/meminfo");
}

TEST(MemoryLimit, CgroupV2LimitOfTheJobOrAnAncestor) {
    FakeNode n("memlimit_v2");
    write(n.root + "/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0\n");
    write(n.root + "/cg/system.slice/slurmstepd.scope/job_7/step_0/memory.max", "max\n");
    write(n.root + "/cg/system.slice/slurmstepd.scope/job_7/memory.max", std::to_string(3 * GiB) + "\n");
    EXPECT_EQ(n.limit().bytes, 3 * GiB);
    EXPECT_NE(n.limit().source.find("job_7/memory.max"), std::string::npos) << n.limit().source;
}

TEST(MemoryLimit, CgroupV1Limit) {
    FakeNode n("memlimit_v1");
    write(n.root + "/proc/self/cgroup", "7:cpuacct,cpu:/slurm/uid_1/job_9\n5:memory:/slurm/uid_1/job_9\n");
    write(n.root + "/cg/memory/slurm/uid_1/job_9/memory.limit_in_bytes", std::to_string(5 * GiB));
    write(n.root + "/cg/memory/memory.limit_in_bytes", "9223372036854771712");  // v1's "unlimited"
    EXPECT_EQ(n.limit().bytes, 5 * GiB);
}

TEST(MemoryLimit, SlurmVariablesAndTheSmallestWins) {
    FakeNode n("memlimit_slurm");
    write(n.root + "/proc/self/cgroup", "0::/job\n");
    write(n.root + "/cg/job/memory.max", std::to_string(6 * GiB));
    n.env["SLURM_MEM_PER_NODE"] = "8192";  // MiB
    EXPECT_EQ(n.limit().bytes, 6 * GiB);
    n.env["SLURM_MEM_PER_NODE"] = "4G";
    EXPECT_EQ(n.limit().bytes, 4 * GiB);
    EXPECT_EQ(n.limit().source, "SLURM_MEM_PER_NODE");
    n.env.erase("SLURM_MEM_PER_NODE");
    n.env["SLURM_MEM_PER_CPU"] = "1024";
    n.env["SLURM_CPUS_ON_NODE"] = "2";
    EXPECT_EQ(n.limit().bytes, 2 * GiB);
}
