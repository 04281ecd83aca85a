#include "train/state/host_copy.hpp"

namespace gpt::train {

HostCopy::~HostCopy() {
    for (Block& b : blocks_) be_.free_host(b.p);
}

void* HostCopy::block(std::size_t index, std::size_t bytes) {
    if (blocks_.size() <= index) blocks_.resize(index + 1);
    Block& b = blocks_[index];
    if (b.p && b.bytes == bytes) return b.p;
    be_.free_host(b.p);
    b = Block{};
    b.p = be_.alloc_host(bytes);
    b.bytes = bytes;
    return b.p;
}

std::shared_ptr<Backend::HostCopyEvent> HostCopy::fill(const std::vector<ChunkHost>& state) {
    // Blocks of chunks that are gone (never in one run: the layout is fixed) are released.
    for (std::size_t i = 4 * state.size(); i < blocks_.size(); ++i) be_.free_host(blocks_[i].p);
    if (blocks_.size() > 4 * state.size()) blocks_.resize(4 * state.size());
    host_.resize(state.size());
    for (std::size_t c = 0; c < state.size(); ++c) {
        const ChunkHost& s = state[c];
        ChunkHost& h = host_[c];
        h.layout = s.layout;
        h.opt_begin = s.opt_begin;
        h.sharded = s.sharded;
        // Each buffer in its own page-aligned block: a tensor at the same offset within a
        // page as its place in the file is written in place (ckpt/direct_writes.cpp).
        h.params = {static_cast<std::byte*>(block(4 * c, s.params.size_bytes())), s.params.size()};
        h.main = {static_cast<float*>(block(4 * c + 1, s.main.size_bytes())), s.main.size()};
        h.exp_avg = {static_cast<float*>(block(4 * c + 2, s.exp_avg.size_bytes())), s.exp_avg.size()};
        h.exp_avg_sq = {static_cast<float*>(block(4 * c + 3, s.exp_avg_sq.size_bytes())), s.exp_avg_sq.size()};
        be_.copy_to_host_async(h.params.data(), s.params.data(), s.params.size_bytes());
        be_.copy_to_host_async(h.main.data(), s.main.data(), s.main.size_bytes());
        be_.copy_to_host_async(h.exp_avg.data(), s.exp_avg.data(), s.exp_avg.size_bytes());
        be_.copy_to_host_async(h.exp_avg_sq.data(), s.exp_avg_sq.data(), s.exp_avg_sq.size_bytes());
    }
    return be_.record_host_copies();
}

std::uint64_t HostCopy::bytes() const {
    std::uint64_t n = 0;
    for (const ChunkHost& h : host_)
        n += h.params.size_bytes() + h.main.size_bytes() + h.exp_avg.size_bytes() + h.exp_avg_sq.size_bytes();
    return n;
}

}  // namespace gpt::train
