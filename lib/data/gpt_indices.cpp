#include "data/gpt_indices.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "core/errors.hpp"

namespace gpt::data {

std::array<std::int64_t, 4> split_boundaries(const std::array<double, 3>& fractions, std::int64_t n) {
    std::array<std::int64_t, 4> b{0, 0, 0, 0};
    for (int i = 0; i < 3; ++i)
        b[i + 1] = b[i] + static_cast<std::int64_t>(std::nearbyint(fractions[i] * static_cast<double>(n)));
    const std::int64_t diff = b[3] - n;
    for (int i = 1; i < 4; ++i) b[i] -= diff;
    return b;
}

// Inlined into the shuffle loops (a call per draw showed in profiles of large shuffles).
[[gnu::always_inline]] inline std::uint64_t IndexShuffler::below(std::uint64_t bound) {
    // Lemire's multiply-and-shift draw: the high word of x * bound is uniform in [0, bound)
    // once the low words below 2^64 mod bound are rejected; the division that finds that
    // threshold runs only for the rare low word under bound (one in 2^64 / bound draws).
    unsigned __int128 m = static_cast<unsigned __int128>(engine_()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
        const std::uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = static_cast<unsigned __int128>(engine_()) * bound;
            low = static_cast<std::uint64_t>(m);
        }
    }
    return static_cast<std::uint64_t>(m >> 64);
}

template <typename T>
void IndexShuffler::shuffle(T* data, std::int64_t n) {
    // Fisher-Yates, its draws made kAhead swaps early so the random element each swap touches
    // is prefetched: over an array larger than the caches every swap is a cache miss, and this
    // lets kAhead of them overlap. The draws and the swaps
    // keep their order, so the permutation is the plain loop's.
    constexpr std::int64_t kAhead = 32;  // a power of two
    std::int64_t ahead[kAhead];
    auto draw = [&](std::int64_t i) {
        const auto j = static_cast<std::int64_t>(below(static_cast<std::uint64_t>(i) + 1));
        ahead[i & (kAhead - 1)] = j;
        __builtin_prefetch(data + j, 1);
    };
    for (std::int64_t i = n - 1; i > 0 && i > n - 1 - kAhead; --i) draw(i);
    for (std::int64_t i = n - 1; i > 0; --i) {
        std::swap(data[i], data[ahead[i & (kAhead - 1)]]);
        if (i - kAhead > 0) draw(i - kAhead);
    }
}
void IndexShuffler::skip_shuffle(std::int64_t n) {
    for (std::int64_t i = n - 1; i > 0; --i) (void)below(static_cast<std::uint64_t>(i) + 1);
}

template void IndexShuffler::shuffle(std::int32_t*, std::int64_t);
template void IndexShuffler::shuffle(std::int64_t*, std::int64_t);

EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::int64_t seq_length, std::int64_t num_samples) {
    GPT_ASSERT(tokens_per_epoch >= 1, "plan_epochs of an empty split");
    EpochPlan p;
    // The fewest epochs whose tokens give num_samples samples of seq_length + 1 tokens (the last
    // token of each is the next one's first): (E x T - 1) / S >= N  <=>  E >= (N x S + 1) / T.
    p.num_epochs = std::max<std::int64_t>(1, (num_samples * seq_length + 1 + tokens_per_epoch - 1) / tokens_per_epoch);
    if (p.num_epochs == 1) return p;
    const std::int64_t sans = ((p.num_epochs - 1) * tokens_per_epoch - 1) / seq_length;
    const std::int64_t from_final = num_samples - sans;
    const std::int64_t per_epoch = (tokens_per_epoch - 1) / seq_length;
    GPT_ASSERT(from_final >= 0 && from_final <= per_epoch + 1, "epoch arithmetic");
    // Megatron: int(0.80 * per_epoch), truncated.
    p.separate_final_epoch = from_final < static_cast<std::int64_t>(0.80 * static_cast<double>(per_epoch));
    p.samples_sans_final_epoch = sans;
    return p;
}

std::vector<std::int32_t> build_document_index(std::int64_t first, std::int64_t last, const EpochPlan& plan,
                                               IndexShuffler& rng) {
    const std::int64_t docs = last - first;
    GPT_ASSERT(last <= INT32_MAX && docs * plan.num_epochs <= INT32_MAX, "a 32-bit document index of sequences [",
               first, ", ", last, ") x ", plan.num_epochs, " epochs");
    std::vector<std::int32_t> idx(static_cast<std::size_t>(docs * plan.num_epochs));
    for (std::int64_t e = 0; e < plan.num_epochs; ++e)
        for (std::int64_t d = 0; d < docs; ++d)
            idx[static_cast<std::size_t>(e * docs + d)] = static_cast<std::int32_t>(first + d);
    shuffle_documents(docs, plan, rng, idx.data());
    return idx;
}

template <typename T>
void shuffle_documents(std::int64_t docs, const EpochPlan& plan, IndexShuffler& rng, T* entries) {
    if (plan.separate_final_epoch) {
        rng.shuffle(entries, docs * (plan.num_epochs - 1));
        rng.shuffle(entries + docs * (plan.num_epochs - 1), docs);
    } else {
        rng.shuffle(entries, docs * plan.num_epochs);
    }
}
template void shuffle_documents(std::int64_t, const EpochPlan&, IndexShuffler&, std::int32_t*);
template void shuffle_documents(std::int64_t, const EpochPlan&, IndexShuffler&, std::int64_t*);

const std::int32_t* DocumentOrder::pack_lengths() {
    // Entry p's length goes to bytes [4p, 4p + 4), which belong to entries read already (p / 2
    // <= p; entry 0 is read before it is overwritten), so one ascending pass needs no copy. The
    // bytes are moved with memcpy: the storage changes from 64-bit to 32-bit objects.
    auto* bytes = reinterpret_cast<unsigned char*>(packed.data());
    const std::size_t n = packed.size();
    for (std::size_t p = 0; p < n; ++p) {
        std::int64_t entry;
        std::memcpy(&entry, bytes + 8 * p, sizeof entry);
        const auto length = static_cast<std::int32_t>(entry >> 32);
        std::memcpy(bytes + 4 * p, &length, sizeof length);
    }
    return std::launder(reinterpret_cast<const std::int32_t*>(bytes));
}

void skip_document_index(std::int64_t first, std::int64_t last, const EpochPlan& plan, IndexShuffler& rng) {
    const std::int64_t docs = last - first;
    if (plan.separate_final_epoch) {
        rng.skip_shuffle(docs * (plan.num_epochs - 1));
        rng.skip_shuffle(docs);
    } else {
        rng.skip_shuffle(docs * plan.num_epochs);
    }
}

SampleIndexWalker::SampleIndexWalker(const std::int32_t* ordered_lengths, std::int64_t count, std::int64_t seq_length)
    : lengths_(ordered_lengths), count_(count), seq_length_(seq_length) {}

void SampleIndexWalker::next(std::int64_t count, std::int32_t* out) {
    const std::int64_t last_pos = count_ - 1;
    std::int64_t doc_pos = doc_pos_, offset = offset_;
    for (std::int64_t k = 0; k < count; ++k) {
        // Each sample takes seq_length + 1 tokens; the last one is shared with the next sample
        // (it is this sample's final label and the next sample's first input).
        std::int64_t remaining = seq_length_ + 1;
        while (remaining != 0) {
            const std::int64_t doc_len = lengths_[doc_pos] - offset;
            remaining -= doc_len;
            if (remaining <= 0) {
                offset += remaining + doc_len - 1;
                remaining = 0;
            } else {
                GPT_ASSERT(doc_pos < last_pos, "sample ", done_ + k + 1, " runs past the document index");
                ++doc_pos;
                offset = 0;
            }
        }
        out[2 * k] = static_cast<std::int32_t>(doc_pos);
        out[2 * k + 1] = static_cast<std::int32_t>(offset);
    }
    doc_pos_ = doc_pos;
    offset_ = offset;
    done_ += count;
}

std::vector<std::int32_t> build_sample_index(const std::int32_t* lengths, std::int64_t first,
                                             const std::vector<std::int32_t>& document_index, std::int64_t seq_length,
                                             std::int64_t num_samples) {
    std::vector<std::int32_t> ordered(document_index.size());
    for (std::size_t p = 0; p < ordered.size(); ++p) ordered[p] = lengths[document_index[p] - first];
    std::vector<std::int32_t> out(static_cast<std::size_t>(2 * (num_samples + 1)), 0);  // entry 0: (0, 0)
    SampleIndexWalker(ordered.data(), static_cast<std::int64_t>(ordered.size()), seq_length)
        .next(num_samples, out.data() + 2);
    return out;
}

template <typename T>
std::vector<T> build_shuffle_index(std::int64_t first_part, std::int64_t total, IndexShuffler& rng) {
    GPT_ASSERT(total - 1 <= std::numeric_limits<T>::max(), total, " samples in a ", sizeof(T), "-byte shuffle index");
    std::vector<T> idx(static_cast<std::size_t>(total));
    for (std::int64_t i = 0; i < total; ++i) idx[static_cast<std::size_t>(i)] = static_cast<T>(i);
    rng.shuffle(idx.data(), first_part);
    if (first_part < total) rng.shuffle(idx.data() + first_part, total - first_part);
    return idx;
}
template std::vector<std::int32_t> build_shuffle_index(std::int64_t, std::int64_t, IndexShuffler&);
template std::vector<std::int64_t> build_shuffle_index(std::int64_t, std::int64_t, IndexShuffler&);

}  // namespace gpt::data
