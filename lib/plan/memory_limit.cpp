#include "plan/memory_limit.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "plan/device_presets.hpp"

namespace gpt::plan {

namespace {

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A limit file's number; 0 for "max", a missing file or text that is not a number.
std::uint64_t read_limit(const std::string& path) {
    const std::string t = read_text(path);
    if (t.empty() || t.rfind("max", 0) == 0) return 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(t.c_str(), &end, 10);
    return end != t.c_str() ? v : 0;
}

void consider(NodeMemory& best, std::uint64_t bytes, const std::string& source) {
    if (bytes == 0) return;
    if (best.bytes == 0 || bytes < best.bytes) best = {bytes, source};
}

// "<root><path>/<file>" for the cgroup and each of its ancestors.
void consider_cgroup_chain(NodeMemory& best, const std::string& root, std::string path,
                           const char* file, const char* what) {
    while (true) {
        const std::string p = root + (path == "/" ? "" : path) + "/" + file;
        consider(best, read_limit(p), std::string(what) + " (" + p + ")");
        if (path.empty() || path == "/") break;
        const auto slash = path.rfind('/');
        path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
}

std::uint64_t env_mib(const std::function<const char*(const char*)>& get, const char* name) {
    const char* v = get(name);
    if (!v || !*v) return 0;
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(v, &end, 10);
    // Slurm may append a unit letter (M, G); MiB is the default.
    std::uint64_t scale = 1ull << 20;
    if (end && (*end == 'G' || *end == 'g')) scale = 1ull << 30;
    if (end && (*end == 'T' || *end == 't')) scale = 1ull << 40;
    return mib * scale;
}

}  // namespace

NodeMemory node_memory_limit(const MemorySources& src) {
    const auto get = src.getenv ? src.getenv : [](const char* n) -> const char* { return std::getenv(n); };
    NodeMemory best;
    consider(best, parse_meminfo_total(read_text(src.proc_root + "/meminfo")), "/proc/meminfo");

    std::istringstream lines(read_text(src.proc_root + "/self/cgroup"));
    for (std::string line; std::getline(lines, line);) {
        // "0::/path" (v2) or "5:memory:/path" / "5:cpuacct,memory:/path" (v1).
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (controllers.empty()) {
            consider_cgroup_chain(best, src.cgroup_root, path, "memory.max", "cgroup v2 memory.max");
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            consider_cgroup_chain(best, src.cgroup_root + "/memory", path, "memory.limit_in_bytes",
                                  "cgroup v1 memory.limit_in_bytes");
        }
    }

    consider(best, env_mib(get, "SLURM_MEM_PER_NODE"), "SLURM_MEM_PER_NODE");
    if (const std::uint64_t per_cpu = env_mib(get, "SLURM_MEM_PER_CPU")) {
        const char* cpus = get("SLURM_CPUS_ON_NODE");
        const long n = cpus ? std::strtol(cpus, nullptr, 10) : 0;
        if (n > 0)
            consider(best, per_cpu * static_cast<std::uint64_t>(n),
                     "SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE " + std::to_string(n));
    }
    return best;
}

}  // namespace gpt::plan
