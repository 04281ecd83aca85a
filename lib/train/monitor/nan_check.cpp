#include "train/monitor/nan_check.hpp"

#include <climits>
#include <cmath>
#include <cstdint>

#include "core/errors.hpp"

namespace gpt::train {

int lowest_rank_with(bool mine, dist::Communicator& world) {
    std::int32_t r = mine ? world.rank() : INT32_MAX;
    world.all_reduce(&r, 1, dist::CommType::I32, dist::ReduceOp::Min);
    return r == INT32_MAX ? -1 : r;
}

std::string share_text(const std::string& text, int root, dist::Communicator& world) {
    std::int64_t n = static_cast<std::int64_t>(text.size());
    world.broadcast(&n, 1, dist::CommType::I64, root);
    std::string out = world.rank() == root ? text : std::string(static_cast<std::size_t>(n), '\0');
    if (n > 0) world.broadcast(out.data(), n, dist::CommType::U8, root);
    return out;
}

namespace {
const char* kind(double v) { return std::isnan(v) ? "NaN" : "Inf"; }

std::string where(int rank, const std::vector<std::string>& hosts) {
    const std::string host = rank >= 0 && static_cast<std::size_t>(rank) < hosts.size() ? hosts[rank] : "?";
    return detail::concat("rank ", rank, " (host ", host, ")");
}

constexpr const char* kTurnOff =
    " (--check-for-nan-in-loss-and-grad; --no-check-for-nan-in-loss-and-grad skips such steps instead)";
}  // namespace

std::string non_finite_loss_report(double local_loss, double loss, std::int64_t iteration,
                                   dist::ProcessGroups& groups, const std::vector<std::string>& hosts) {
    auto& world = groups.world();
    const int r = lowest_rank_with(!std::isfinite(local_loss), world);
    if (r < 0)  // every rank's loss is finite: their data-parallel mean overflowed
        return detail::concat("lm loss is ", kind(loss), " at iteration ", iteration,
                              ": the data-parallel mean of finite losses overflowed", kTurnOff);
    double theirs = local_loss;
    world.broadcast(&theirs, 1, dist::CommType::F64, r);
    return detail::concat("lm loss is ", kind(theirs), " at iteration ", iteration, " on ", where(r, hosts),
                          kTurnOff, ". HINT: lower --lr, use --bf16, or check the data");
}

std::string non_finite_grad_report(ModelChunks& chunks, std::int64_t iteration,
                                   dist::ProcessGroups& groups, const std::vector<std::string>& hosts) {
    auto& world = groups.world();
    // Where it arose: the local gradients each rank checked before the reduction.
    const std::string local = chunks.local_non_finite_grad();
    if (const int r = lowest_rank_with(!local.empty(), world); r >= 0)
        return detail::concat("gradient of ", share_text(local, r, world),
                              " is not finite (NaN or Inf) at iteration ", iteration, " on ", where(r, hosts),
                              ", in its local gradient before the data-parallel reduction", kTurnOff,
                              ". HINT: lower --lr, use --bf16, or check the data");
    // Every local gradient was finite (or unchecked): look at what the reduction made.
    const std::string mine = chunks.first_non_finite_grad();
    const int r = lowest_rank_with(!mine.empty(), world);
    if (r < 0)  // every element finite, but the sum of squares overflowed
        return detail::concat("the gradient norm is not finite at iteration ", iteration,
                              " (every gradient element is finite: their squares overflow)", kTurnOff,
                              ". HINT: lower --lr or check the data");
    const std::string name = share_text(mine, r, world);
    return detail::concat("gradient of ", name, " is not finite (NaN or Inf) at iteration ", iteration,
                          " on ", where(r, hosts), ", after the data-parallel reduction (no rank's local "
                          "gradient was: their sum overflowed)", kTurnOff,
                          ". HINT: lower --lr, use --bf16, or check the data");
}

}  // namespace gpt::train
