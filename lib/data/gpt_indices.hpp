// The index arithmetic of Megatron's GPTDataset and BlendedDataset, as pure functions over
// plain arrays (no files, no MPI) so tests can check them directly.
//
// Megatron splits, shuffles and samples the *sequences* of an indexed dataset (its "documents"
// in the .bin are sequences; they coincide unless a JSON list made several per document).
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/large_array.hpp"

namespace gpt::data {

// parse_split (the --split value) is in config/data_blend.hpp.
// Megatron's split boundaries over n elements: [0, a, b, n] from rounded fractions
// (Python's round: ties to even), the rounding remainder taken from the front.
std::array<std::int64_t, 4> split_boundaries(const std::array<double, 3>& fractions, std::int64_t n);

// Deterministic shuffling: a 64-bit Mersenne Twister seeded with --seed, and our own unbiased
// bounded draw (std::shuffle's algorithm is unspecified, so it would differ across standard
// libraries). Megatron uses numpy's RandomState; the index values therefore differ from
// Megatron's, while their construction and properties are the same.
class IndexShuffler {
public:
    explicit IndexShuffler(std::uint64_t seed) : engine_(seed) {}
    // For std::int32_t and std::int64_t entries: the same permutation either way.
    template <typename T>
    void shuffle(T* data, std::int64_t n);
    // Leaves the engine where shuffle(data, n) would, without an array: the draws only.
    void skip_shuffle(std::int64_t n);

private:
    std::uint64_t below(std::uint64_t bound);  // uniform in [0, bound)
    std::mt19937_64 engine_;
};

struct EpochPlan {
    std::int64_t num_epochs = 1;
    bool separate_final_epoch = false;
    std::int64_t samples_sans_final_epoch = 0;  // meaningful when separate_final_epoch
};

// Smallest number of epochs giving num_samples samples of seq_length + 1 tokens, and whether the
// last epoch is shuffled apart (when it contributes < 80% of an epoch, as in Megatron).
// Needs tokens_per_epoch >= 1 (an empty split is refused by its caller, with the names).
EpochPlan plan_epochs(std::int64_t tokens_per_epoch, std::int64_t seq_length, std::int64_t num_samples);

// The split's sequence ids repeated num_epochs times and shuffled (the final epoch separately
// when plan.separate_final_epoch). 32-bit, as Megatron's: needs last <= 2^31 - 1 and fewer than
// 2^31 entries (the builder refuses larger requests with the numbers before calling this).
// (The start-up builds build_document_order below; this plain form is its tested reference.)
std::vector<std::int32_t> build_document_index(std::int64_t first, std::int64_t last, const EpochPlan& plan,
                                               IndexShuffler& rng);
// build_document_index's index (the same draws, the same permutation) and beside it each entry's
// sequence length: what the sample index walks, carried through the shuffle instead of gathered
// by a random read per entry afterwards.
struct DocumentOrder {
    LargeArray<std::int64_t> packed;  // (length << 32) | document, in document-index order
    std::size_t size() const { return packed.size(); }
    std::int32_t document(std::size_t p) const { return static_cast<std::int32_t>(packed[p] & 0xffffffff); }
    // The lengths alone, in document-index order (what the sample walk reads), moved into the
    // front half of packed's own storage: a second array would be one more allocation for the
    // kernel to zero and fault in at every cold start (4 bytes an entry; 13 MB for a split of
    // 3.3 million documents). Call it once the documents are no longer needed: document() is
    // meaningless afterwards. The pointer lives as long as `packed`.
    const std::int32_t* pack_lengths();
};
// build_document_index's shuffle (the final epoch apart when the plan says so) over any entries.
// T: std::int32_t or std::int64_t.
template <typename T>
void shuffle_documents(std::int64_t docs, const EpochPlan& plan, IndexShuffler& rng, T* entries);
// length_of(s): sequence s's length (>= 0), read once per sequence, in order.
template <typename LengthOf>
DocumentOrder build_document_order(std::int64_t first, std::int64_t last, const EpochPlan& plan, IndexShuffler& rng,
                                   LengthOf&& length_of) {
    const std::int64_t docs = last - first;
    GPT_ASSERT(last <= INT32_MAX && docs * plan.num_epochs <= INT32_MAX, "a 32-bit document index of sequences [",
               first, ", ", last, ") x ", plan.num_epochs, " epochs");
    // Each entry carries its length in the high half: the draws and swaps are
    // build_document_index's, so the low halves are its permutation, and the lengths come out
    // in document-index order without a random read per entry after the shuffle.
    const auto n = static_cast<std::size_t>(docs * plan.num_epochs);
    DocumentOrder out{LargeArray<std::int64_t>(n)};
    std::int64_t* packed = out.packed.data();
    for (std::int64_t d = 0; d < docs; ++d) {
        const std::int32_t length = length_of(first + d);
        GPT_ASSERT(length >= 0, "sequence ", first + d, " of negative length");
        packed[d] = (static_cast<std::int64_t>(length) << 32) | (first + d);
    }
    for (std::int64_t e = 1; e < plan.num_epochs; ++e) std::copy(packed, packed + docs, packed + e * docs);
    shuffle_documents(docs, plan, rng, packed);
    return out;
}
// Leaves rng where build_document_index(first, last, plan, rng) would, touching no memory: the
// shuffle index, drawn next, can then be built beside the document and sample indices.
void skip_document_index(std::int64_t first, std::int64_t last, const EpochPlan& plan, IndexShuffler& rng);

// Megatron's build_sample_idx: (num_samples + 1) x 2 entries (position in document_index,
// token offset) where sample i spans from entry i to entry i+1 inclusive of the end token.
// lengths[s - first] is the length of sequence s (the ids in document_index are >= first).
// Both entries fit 32 bits: positions index a 32-bit document index, offsets lie inside one
// sequence of an int32 length.
// The same walk in pieces, for a writer that streams the index, over the documents' lengths
// already in document-index order (ordered_lengths[p] = lengths[document_index[p] - first],
// count of them; gathering them is the walk's random access, which a caller may spread over
// threads): next(n, out) writes the entries of the next n samples (2 x n values; entry 0,
// (0, 0), is the caller's).
class SampleIndexWalker {
public:
    SampleIndexWalker(const std::int32_t* ordered_lengths, std::int64_t count, std::int64_t seq_length);
    void next(std::int64_t n, std::int32_t* out);

private:
    const std::int32_t* lengths_;
    std::int64_t count_;
    std::int64_t seq_length_;
    std::int64_t doc_pos_ = 0, offset_ = 0, done_ = 0;
};
std::vector<std::int32_t> build_sample_index(const std::int32_t* lengths, std::int64_t first,
                                             const std::vector<std::int32_t>& document_index, std::int64_t seq_length,
                                             std::int64_t num_samples);

// Permutation of [0, total): the first `first_part` shuffled among themselves, the rest
// among themselves (all together when first_part == total). T: std::int32_t when total fits.
template <typename T>
std::vector<T> build_shuffle_index(std::int64_t first_part, std::int64_t total, IndexShuffler& rng);

// Megatron's build_blending_indices: sample i goes to the dataset furthest below its share.
void build_blending_indices(const std::vector<double>& weights, std::int64_t size,
                            std::vector<std::int16_t>& dataset_index, std::vector<std::int64_t>& dataset_sample_index);
// The same with Megatron's plain loop: what build_blending_indices runs without AVX2, compiled
// everywhere so the tests check it on every machine.
void build_blending_indices_plain(const std::vector<double>& weights, std::int64_t size,
                                  std::vector<std::int16_t>& dataset_index,
                                  std::vector<std::int64_t>& dataset_sample_index);

}  // namespace gpt::data
