// GPT dataset: split arithmetic, deterministic indices that cover each split document the
// expected number of times, samples that follow the document stream, the cache built once and
// shared across ranks, blending proportions, mock data and the resumable micro-batch loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <mpi.h>

#include "config/data_blend.hpp"
#include "core/errors.hpp"
#include "data/gpt_dataset.hpp"
#include "data/gpt_indices.hpp"
#include "data/index_cache.hpp"
#include "data/indexed_dataset.hpp"
#include "data/split_datasets.hpp"
#include "data_test_util.hpp"
#include "test_env.hpp"

using namespace gpt::data;
using gpt::parse_split;
namespace fs = std::filesystem;

namespace {

// Sequence d holds tokens 1000*d + 0, 1, ..., so every token names its document and position.
std::string make_dataset(const std::string& dir, const std::string& name, int docs, std::uint32_t seed) {
    const std::string prefix = dir + "/" + name;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        IndexedDatasetWriter w(prefix, TokenDType::I32);
        std::uint32_t x = seed;
        for (int d = 0; d < docs; ++d) {
            x = x * 1664525u + 1013904223u;
            std::vector<std::int32_t> seq(1 + (x >> 8) % 40);
            for (std::size_t k = 0; k < seq.size(); ++k) seq[k] = 1000 * d + static_cast<std::int32_t>(k);
            w.add_sequence(seq);
            w.end_document();
        }
        w.finalize();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return prefix;
}

std::vector<std::int64_t> copy(const IndexView& a) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(a.size()));
    for (std::int64_t i = 0; i < a.size(); ++i) out[static_cast<std::size_t>(i)] = a[i];
    return out;
}

}  // namespace

TEST(GptIndices, SplitLikeMegatron) {
    auto f = parse_split("969, 30, 1");
    EXPECT_NEAR(f[0], 0.969, 1e-12);
    EXPECT_EQ(split_boundaries(f, 1000), (std::array<std::int64_t, 4>{0, 969, 999, 1000}));
    // Python's round() ties to even: 0.5 * 5 = 2.5 -> 2; the remainder comes off the front.
    EXPECT_EQ(split_boundaries(parse_split("50,50"), 5), (std::array<std::int64_t, 4>{0, 3, 5, 5}));
    // 3.33 rounds to 3 three times; the missing element shifts every boundary by one.
    EXPECT_EQ(split_boundaries(parse_split("1/1/1"), 10), (std::array<std::int64_t, 4>{0, 4, 7, 10}));
    EXPECT_THROW(parse_split("a,b"), gpt::UsageError);
    EXPECT_THROW(parse_split("0,0,0"), gpt::UsageError);
}

TEST(GptIndices, EpochPlanAndSampleIndex) {
    // 100 tokens per epoch, seq 10: one epoch gives (100-1)/10 = 9 samples.
    EXPECT_EQ(plan_epochs(100, 10, 9).num_epochs, 1);
    EpochPlan p = plan_epochs(100, 10, 10);
    EXPECT_EQ(p.num_epochs, 2);
    EXPECT_TRUE(p.separate_final_epoch);  // 1 sample from the last epoch < 80% of 9
    EXPECT_EQ(p.samples_sans_final_epoch, 9);
    EXPECT_FALSE(plan_epochs(100, 10, 17).separate_final_epoch);
    // Documents of 5 tokens; seq 4: samples start at 0,4,8,... of the stream, sharing a token.
    std::vector<std::int32_t> docs{0, 1, 2};
    const std::vector<std::int32_t> five(3, 5);
    auto si = build_sample_index(five.data(), 0, docs, 4, 3);
    EXPECT_EQ(si, (std::vector<std::int32_t>{0, 0, 0, 4, 1, 3, 2, 2}));
}

template <typename T>
static std::uint64_t fnv1a(const std::vector<T>& a) {
    std::uint64_t h = 1469598103934665603ull;
    for (T v : a) h = (h ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(v))) * 1099511628211ull;
    return h;
}

// The shuffles and the sample index are what every existing cache file holds: a faster
// builder must give the same values (these digests come from the plain Fisher-Yates loop and
// the plain sample walk, before either prefetched), and leave the engine where they did.
TEST(GptIndices, ShuffleAndSampleIndexKeepTheirValues) {
    struct Golden {
        std::int64_t n;
        std::uint64_t shuffled, next;  // digests of iota(n) shuffled, then of iota(100) shuffled after it
    };
    for (const Golden& g : {Golden{33, 0x668304a9da7b4b73ull, 0x18b3720b10dab723ull},
                            Golden{1000, 0xc5f401a1939c231full, 0xd468e53f28c07e49ull},
                            Golden{100003, 0x82f93c472077d412ull, 0x2425e440154b6ab3ull}}) {
        // The same permutation over 64- and 32-bit entries (the two shuffle index types).
        std::vector<std::int64_t> a(static_cast<std::size_t>(g.n)), b(100);
        std::vector<std::int32_t> a32(a.size());
        std::iota(a.begin(), a.end(), 0);
        std::iota(a32.begin(), a32.end(), 0);
        std::iota(b.begin(), b.end(), 0);
        IndexShuffler rng(1234), rng32(1234);
        rng.shuffle(a.data(), g.n);
        rng.shuffle(b.data(), 100);
        rng32.shuffle(a32.data(), g.n);
        EXPECT_EQ(fnv1a(a), g.shuffled) << "n " << g.n;
        EXPECT_EQ(fnv1a(a32), g.shuffled) << "n " << g.n;
        EXPECT_EQ(fnv1a(b), g.next) << "n " << g.n;
    }
    // 5000 documents of 1-700 tokens from 100 on, in shuffled order, samples of 64 tokens.
    std::vector<std::int32_t> lengths(5000);
    std::uint32_t x = 7;
    std::int64_t tokens = 0;
    for (std::int32_t& l : lengths) {
        x = x * 1664525u + 1013904223u;
        l = static_cast<std::int32_t>(1 + (x >> 8) % 700);
        tokens += l;
    }
    std::vector<std::int32_t> docs(5000);
    std::iota(docs.begin(), docs.end(), 100);
    IndexShuffler rng(99);
    rng.shuffle(docs.data(), 5000);
    const auto si = build_sample_index(lengths.data(), 100, docs, 64, (tokens - 1) / 64);
    EXPECT_EQ(si.size(), 54464u);
    EXPECT_EQ(fnv1a(si), 0x72c91433b8094b17ull);
}

// The start-up's document order (lengths carried through the shuffle) is build_document_index's
// permutation with each entry's length beside it, and leaves the engine where it does: one
// epoch, several, and a final epoch shuffled apart.
TEST(GptIndices, DocumentOrderIsTheDocumentIndexWithItsLengths) {
    auto length_of = [](std::int64_t seq) { return static_cast<std::int32_t>((seq * 7919) % 1000 + (seq % 5 == 0 ? 0 : 1)); };
    for (const EpochPlan& plan : {plan_epochs(5000, 10, 100), plan_epochs(5000, 10, 600), plan_epochs(5000, 10, 900)}) {
        IndexShuffler a(11), b(11);
        const std::vector<std::int32_t> want = build_document_index(3, 1003, plan, a);
        DocumentOrder got = build_document_order(3, 1003, plan, b, length_of);
        ASSERT_EQ(got.size(), want.size()) << plan.num_epochs << " epochs, separate final " << plan.separate_final_epoch;
        for (std::size_t p = 0; p < want.size(); ++p)
            ASSERT_EQ(got.document(p), want[p]) << "entry " << p << ", " << plan.num_epochs << " epochs";
        const std::int32_t* lengths = got.pack_lengths();
        for (std::size_t p = 0; p < want.size(); ++p)
            ASSERT_EQ(lengths[p], length_of(want[p])) << "entry " << p << ", " << plan.num_epochs << " epochs";
        EXPECT_EQ(build_shuffle_index<std::int32_t>(50, 100, a), build_shuffle_index<std::int32_t>(50, 100, b));
    }
}

// The shuffle index may be drawn on a second thread whose engine skipped the document
// shuffle's draws: it must be left exactly where the document shuffle leaves it.
TEST(GptIndices, SkippingTheDocumentIndexLeavesTheEngineWhereBuildingItDoes) {
    for (const EpochPlan& plan : {plan_epochs(5000, 10, 100), plan_epochs(5000, 10, 600), plan_epochs(5000, 10, 900)}) {
        IndexShuffler built(7), skipped(7);
        (void)build_document_index(3, 1003, plan, built);
        skip_document_index(3, 1003, plan, skipped);
        const auto a = build_shuffle_index<std::int32_t>(50, 100, built);
        const auto b = build_shuffle_index<std::int32_t>(50, 100, skipped);
        EXPECT_EQ(a, b) << plan.num_epochs << " epochs, separate final " << plan.separate_final_epoch;
    }
}

TEST(GptIndices, BlendingFollowsWeights) {
    std::vector<std::int16_t> which;
    std::vector<std::int64_t> sample;
    build_blending_indices({0.3, 0.7}, 1000, which, sample);
    const auto ones = std::count(which.begin(), which.end(), 1);
    EXPECT_NEAR(ones, 700, 1);
    // Each dataset's samples are taken in order 0, 1, 2, ...
    std::int64_t next[2] = {0, 0};
    for (std::size_t i = 0; i < which.size(); ++i) EXPECT_EQ(sample[i], next[which[i]]++);
}

// Megatron's helper (helpers.cpp, built without -march, so without FMA) rounds weight * x
// before subtracting the count; a fused multiply-subtract (what -march=native lets a compiler
// contract it to) rounds once, and the two break near-ties differently. These weights (four
// datasets, normalised as Megatron does) meet one at sample 2026: Megatron's order (the same
// arithmetic in Python) takes dataset 0's sample 463 there, where a contracted loop takes
// dataset 3. Past that sample the whole blend's order differs.
TEST(GptIndices, BlendingRoundsAsMegatronsHelperDoes) {
    const std::vector<double> weights = {0x1.d40713758328bp-3, 0x1.d68e069211b0ap-2, 0x1.f35d407137583p-4,
                                         0x1.852e3f2dbdc9fp-3};
    std::vector<std::int16_t> which;
    std::vector<std::int64_t> sample;
    build_blending_indices(weights, 2100, which, sample);
    const std::vector<std::int16_t> want_which = {2, 1, 3, 1, 0, 1, 0, 1, 3, 1};
    const std::vector<std::int64_t> want_sample = {246, 928, 384, 929, 462, 930, 463, 931, 385, 932};
    EXPECT_EQ(std::vector<std::int16_t>(which.begin() + 2020, which.begin() + 2030), want_which);
    EXPECT_EQ(std::vector<std::int64_t>(sample.begin() + 2020, sample.begin() + 2030), want_sample);
}

// The vectorised builder against Megatron's loop written plainly (helpers.cpp's arithmetic:
// fl(w * max(i, 1)) - count, the first largest on a tie), on blends whose sizes fill 8-wide
// blocks exactly, leave padding lanes, or are one dataset; equal weights tie at every step.
TEST(GptIndices, BlendingEqualsMegatronsLoopForEveryBlendSize) {
    auto megatron = [](const std::vector<double>& w, std::int64_t size) {
        std::vector<std::int16_t> which(static_cast<std::size_t>(size));
        std::vector<std::int64_t> count(w.size(), 0);
        for (std::int64_t i = 0; i < size; ++i) {
            const double x = std::max(static_cast<double>(i), 1.0);
            std::size_t best = 0;
            volatile double product = w[0] * x;  // volatile: rounded before the subtraction
            double best_err = product - static_cast<double>(count[0]);
            for (std::size_t d = 1; d < w.size(); ++d) {
                product = w[d] * x;
                const double err = product - static_cast<double>(count[d]);
                if (err > best_err) best_err = err, best = d;
            }
            which[static_cast<std::size_t>(i)] = static_cast<std::int16_t>(best);
            ++count[best];
        }
        return which;
    };
    std::mt19937_64 gen(5);
    for (const std::size_t n : {1, 3, 8, 9, 16, 100, 301}) {
        for (const bool equal : {false, true}) {
            std::vector<double> w(n, 1.0);
            if (!equal)
                for (double& v : w) v = std::uniform_real_distribution<double>(0.001, 1.0)(gen);
            if (!equal && n > 2) w[1] = 0.0;  // a zero weight: never drawn
            double sum = 0;
            for (double v : w) sum += v;
            for (double& v : w) v /= sum;
            const std::int64_t size = 40 * static_cast<std::int64_t>(n) + 7;
            std::vector<std::int16_t> which;
            std::vector<std::int64_t> sample;
            const std::vector<std::int16_t> want = megatron(w, size);
            // The one start-up uses (vectorised with AVX2), and the plain loop of other CPUs.
            for (const bool plain : {false, true}) {
                if (plain)
                    build_blending_indices_plain(w, size, which, sample);
                else
                    build_blending_indices(w, size, which, sample);
                ASSERT_EQ(which, want) << n << " datasets, equal weights " << equal << ", plain " << plain;
                std::vector<std::int64_t> next(n, 0);
                for (std::size_t i = 0; i < which.size(); ++i) ASSERT_EQ(sample[i], next[which[i]]++);
            }
        }
    }
}

TEST(GptDataset, IndicesDeterministicCoverEachDocumentAndFollowTheStream) {
    const std::string dir = gpt::test::scratch_dir("gpt_indices");
    const std::string prefix = make_dataset(dir, "d", 200, 7);
    auto data = std::make_shared<const IndexedDataset>(prefix);
    const int seq = 16;
    std::int64_t split_tokens = 0;
    for (int i = 20; i < 180; ++i) split_tokens += data->sequence_length(i);
    const std::int64_t want = (split_tokens * 5) / (2 * seq);  // about 2.5 epochs
    GptDataset ds(data, "train", 20, 180, seq, 1234, want, dir + "/cache", MPI_COMM_WORLD);
    EXPECT_EQ(ds.num_epochs(), 3);
    EXPECT_GE(ds.size(), want);

    // Every split document appears exactly num_epochs times, no other document at all.
    std::map<std::int64_t, int> seen;
    for (std::int64_t i = 0; i < ds.document_index().size(); ++i) ++seen[ds.document_index()[i]];
    ASSERT_EQ(seen.size(), 160u);
    for (auto [doc, n] : seen) {
        EXPECT_TRUE(doc >= 20 && doc < 180);
        EXPECT_EQ(n, 3) << "document " << doc;
    }
    // The shuffle index is a permutation.
    auto shuffle = copy(ds.shuffle_index());
    std::sort(shuffle.begin(), shuffle.end());
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(shuffle.size()); ++i) ASSERT_EQ(shuffle[i], i);

    // Unshuffled sample j is tokens [j*seq, j*seq + seq] of the documents in document_index order.
    std::vector<std::int32_t> stream;
    for (std::int64_t i = 0; i < ds.document_index().size(); ++i) {
        auto s = data->sequence(ds.document_index()[i]);
        stream.insert(stream.end(), s.begin(), s.end());
    }
    std::vector<std::int32_t> buf(seq + 1);
    for (std::int64_t i = 0; i < ds.size(); ++i) {
        ds.sample(i, buf.data());
        const std::int64_t j = ds.shuffle_index()[i];
        ASSERT_TRUE(std::equal(buf.begin(), buf.end(), stream.begin() + j * seq)) << "sample " << i;
    }

    // Same parameters: same arrays (from the cache, and rebuilt in a fresh folder).
    GptDataset again(data, "train", 20, 180, seq, 1234, want, dir + "/cache", MPI_COMM_WORLD);
    EXPECT_EQ(again.cache_path(), ds.cache_path());
    GptDataset fresh(data, "train", 20, 180, seq, 1234, want, dir + "/cache2", MPI_COMM_WORLD);
    EXPECT_EQ(copy(fresh.document_index()), copy(ds.document_index()));
    EXPECT_EQ(copy(fresh.sample_index()), copy(ds.sample_index()));
    EXPECT_EQ(copy(fresh.shuffle_index()), copy(ds.shuffle_index()));
    GptDataset other_seed(data, "train", 20, 180, seq, 99, want, dir + "/cache", MPI_COMM_WORLD);
    EXPECT_NE(other_seed.cache_path(), ds.cache_path());
    EXPECT_NE(copy(other_seed.shuffle_index()), copy(ds.shuffle_index()));
}

TEST(GptDataset, CacheBuiltOnceAndSharedByAllRanks) {
    const std::string dir = gpt::test::scratch_dir("gpt_cache");
    const std::string prefix = make_dataset(dir, "d", 50, 3);
    auto data = std::make_shared<const IndexedDataset>(prefix);
    GptDataset ds(data, "valid", 0, 50, 8, 5, 100, "", MPI_COMM_WORLD);
    // Megatron's default place: <prefix>/cache/GPTDataset_indices.
    EXPECT_EQ(fs::path(ds.cache_path()).parent_path(), fs::path(prefix + "/cache/GPTDataset_indices"));
    std::int64_t files = 0;
    for (const auto& e : fs::directory_iterator(fs::path(ds.cache_path()).parent_path())) files += e.path().string().find(".tmp") == std::string::npos;
    EXPECT_EQ(files, 1);  // the split's three arrays in one file, written whole
    // Every rank reads the same samples.
    std::vector<std::int32_t> buf(9);
    long long local = 0;
    for (std::int64_t i = 0; i < ds.size(); ++i) {
        ds.sample(i, buf.data());
        for (int k = 0; k < 9; ++k) local = local * 31 + buf[k];
    }
    long long lo = 0, hi = 0;
    MPI_Allreduce(&local, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&local, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi);
}

// The builder (rank 0) rebuilds a cache file that is truncated, not a cache file at all, or
// foreign (built for other parameters), with a warning; one whose framing is right but whose
// values are impossible is refused on every rank, naming the file.
// The file layout with either shuffle width: an odd number of 32-bit entries before the shuffle
// index makes the writer pad it to 8 bytes; every value reads back, the length is the header's.
TEST(IndexCache, BothShuffleWidthsRoundTrip) {
    const std::string dir = gpt::test::scratch_dir("index_cache_widths." + std::to_string(gpt::test::world_rank()));
    const std::vector<std::int32_t> doc{5, 3, 4}, smp{0, 0, 2, 1, 2, 6};
    for (bool wide : {false, true}) {
        const std::string path = dir + (wide ? "/wide.bin" : "/narrow.bin");
        IndexCacheWriter w(path, "desc", 2, 3, 6, 2, wide);
        w.append(doc);
        w.append(smp);
        if (wide)
            w.append(std::vector<std::int64_t>{(std::int64_t{1} << 40), 0});
        else
            w.append(std::vector<std::int32_t>{1, 0});
        w.commit();
        // 64 + 4 x 9 = 100, padded to 104; then 2 entries and the 4-byte description.
        EXPECT_EQ(fs::file_size(path), 104u + (wide ? 16 : 8) + 4) << path;
        const MappedIndexCache m(path, "desc");
        EXPECT_EQ(m.num_epochs(), 2);
        EXPECT_EQ(copy(m.document_index()), (std::vector<std::int64_t>{5, 3, 4}));
        EXPECT_EQ(copy(m.sample_index()), (std::vector<std::int64_t>{0, 0, 2, 1, 2, 6}));
        EXPECT_EQ(copy(m.shuffle_index()), (std::vector<std::int64_t>{wide ? (std::int64_t{1} << 40) : 1, 0}));
    }
}

TEST(GptDataset, DamagedCacheIsRebuiltOrRefused) {
    const std::string dir = gpt::test::scratch_dir("gpt_corrupt");
    const std::string prefix = make_dataset(dir, "d", 30, 11);
    auto data = std::make_shared<const IndexedDataset>(prefix);
    std::string path, other;
    std::vector<std::int64_t> doc, smp, shf;
    {
        GptDataset ds(data, "train", 0, 30, 8, 1, 40, dir + "/cache", MPI_COMM_WORLD);
        path = ds.cache_path();
        doc = copy(ds.document_index());
        smp = copy(ds.sample_index());
        shf = copy(ds.shuffle_index());
        GptDataset seed2(data, "train", 0, 30, 8, 2, 40, dir + "/cache", MPI_COMM_WORLD);
        other = seed2.cache_path();
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto damage_then_open = [&](const std::function<void()>& damage) {
        MPI_Barrier(MPI_COMM_WORLD);  // every rank has finished reading the file
        if (rank == 0) damage();
        MPI_Barrier(MPI_COMM_WORLD);
        GptDataset ds(data, "train", 0, 30, 8, 1, 40, dir + "/cache", MPI_COMM_WORLD);
        EXPECT_EQ(copy(ds.document_index()), doc);
        EXPECT_EQ(copy(ds.sample_index()), smp);
        EXPECT_EQ(copy(ds.shuffle_index()), shf);
        EXPECT_EQ(ds.built_cache(), rank == 0);
    };
    damage_then_open([&] { fs::resize_file(path, fs::file_size(path) - 8); });
    damage_then_open([&] { fs::resize_file(path, 10); });
    damage_then_open([&] { fs::copy_file(other, path, fs::copy_options::overwrite_existing); });
    {
        std::string error;
        try {
            MappedIndexCache foreign(other, "not its description");
        } catch (const gpt::DataError& e) {
            error = e.what();
        }
        EXPECT_NE(error.find("is foreign: it was built for other dataset parameters"), std::string::npos) << error;
    }

    // An out-of-range document id in a well-framed file: no builder would write it.
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        std::FILE* f = std::fopen(path.c_str(), "r+b");
        ASSERT_NE(f, nullptr);
        const std::int32_t bad = 31;
        std::fseek(f, 64, SEEK_SET);  // the first document-index entry
        std::fwrite(&bad, 4, 1, f);
        std::fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    try {
        GptDataset ds(data, "train", 0, 30, 8, 1, 40, dir + "/cache", MPI_COMM_WORLD);
        ADD_FAILURE() << "a cache with an impossible document id was accepted";
    } catch (const gpt::DataError& e) {
        EXPECT_NE(std::string(e.what()).find(path + "' is corrupt (document index entry out of range)"),
                  std::string::npos) << e.what();
    }
    // An empty split is refused with its name and numbers.
    try {
        GptDataset(data, "test", 30, 30, 8, 1, 1, dir + "/cache", MPI_COMM_WORLD);
        ADD_FAILURE() << "an empty split was accepted";
    } catch (const gpt::DataError& e) {
        EXPECT_NE(std::string(e.what()).find("the test split of '" + prefix + "' is empty (sequences [30, 30) of 30"),
                  std::string::npos) << e.what();
    }
}

// A split shorter than one sequence asked for no samples holds none (Megatron: a dataset of
// length 0); its cache file is whole and reads back (the new user's gpt-1.3b failure).
TEST(GptDataset, ZeroSamplesFromASplitShorterThanOneSequence) {
    const std::string dir = gpt::test::scratch_dir("gpt_zero");
    const std::string prefix = make_dataset(dir, "d", 3, 5);
    auto data = std::make_shared<const IndexedDataset>(prefix);
    for (int pass = 0; pass < 2; ++pass) {  // built, then read back from the cache
        GptDataset ds(data, "test", 0, 3, 2048, 1, 0, dir + "/cache", MPI_COMM_WORLD);
        EXPECT_EQ(ds.size(), 0);
        EXPECT_EQ(ds.num_epochs(), 1);
    }
}

TEST(GptDataset, BuildFromConfigWithBlendAndSplit) {
    const std::string dir = gpt::test::scratch_dir("gpt_build");
    const std::string a = make_dataset(dir, "a", 120, 1), b = make_dataset(dir, "b", 80, 2);
    gpt::DataConfig cfg;
    cfg.data_path = {"0.3", a, "0.7", b};
    cfg.split = "8,1,1";
    cfg.data_cache_path = dir + "/cache";
    GptDatasets sets = build_gpt_datasets(cfg, 12, 42, {500, 60, 30}, MPI_COMM_WORLD);
    ASSERT_TRUE(sets.train && sets.valid && sets.test);
    EXPECT_EQ(sets.train->size(), 500);
    EXPECT_EQ(sets.valid->size(), 60);
    auto* blend = dynamic_cast<BlendedDataset*>(sets.train.get());
    ASSERT_NE(blend, nullptr);
    std::int64_t from_b = 0;
    std::vector<std::int32_t> buf(13);
    for (std::int64_t i = 0; i < 500; ++i) {
        from_b += blend->dataset_of(i);
        sets.train->sample(i, buf.data());
    }
    EXPECT_NEAR(from_b, 350, 1);
    // Training documents only: a's train split is sequences [0, 96) -> tokens < 96000.
    cfg.data_path = {a};
    cfg.split = "100,0,0";
    sets = build_gpt_datasets(cfg, 12, 42, {50, 10, 10}, MPI_COMM_WORLD);
    EXPECT_TRUE(sets.train && !sets.valid && !sets.test);
    // A split asked for no samples (--eval-iters 0) is not built, whatever --split gives it.
    cfg.split = "8,1,1";
    cfg.data_cache_path = dir + "/cache-no-eval";
    sets = build_gpt_datasets(cfg, 12, 42, {50, 0, 0}, MPI_COMM_WORLD);
    EXPECT_TRUE(sets.train && !sets.valid && !sets.test);
    std::int64_t files = 0;
    for (const auto& e : fs::directory_iterator(cfg.data_cache_path)) files += e.path().string().find("-train-") != std::string::npos ? 1 : 100;
    EXPECT_EQ(files, 1);
    MPI_Barrier(MPI_COMM_WORLD);  // every rank has listed the folder before rank 0 writes more
    // A blend part of weight 0 is never drawn from, and needs no index.
    cfg.data_path = {"1", a, "0", b};
    sets = build_gpt_datasets(cfg, 12, 42, {50, 0, 0}, MPI_COMM_WORLD);
    for (std::int64_t i = 0; i < 50; ++i) EXPECT_EQ(dynamic_cast<BlendedDataset*>(sets.train.get())->dataset_of(i), 0);
    // One dataset twice: rank 0's builder threads write the same cache file at once (each
    // under its own temporary name); both parts read it.
    cfg.data_path = {"0.5", a, "0.5", a};
    cfg.data_cache_path = dir + "/cache-twice";
    sets = build_gpt_datasets(cfg, 12, 42, {400, 0, 0}, MPI_COMM_WORLD);
    ASSERT_EQ(sets.train->size(), 400);
    for (std::int64_t i = 0; i < 400; ++i) sets.train->sample(i, buf.data());
    for (const auto& e : fs::directory_iterator(cfg.data_cache_path))
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    cfg.data_path = {"0.5", a, "0.5"};
    EXPECT_THROW(build_gpt_datasets(cfg, 12, 42, {50, 0, 0}, MPI_COMM_WORLD), gpt::UsageError);
    cfg.data_path = {dir + "/missing"};
    EXPECT_THROW(build_gpt_datasets(cfg, 12, 42, {50, 0, 0}, MPI_COMM_WORLD), gpt::IoError);
}

TEST(GptDataset, MockDataIsDeterministic) {
    gpt::DataConfig cfg;
    cfg.mock_data = true;
    GptDatasets a = build_gpt_datasets(cfg, 32, 7, {100, 10, 0}, MPI_COMM_NULL, 1000);
    GptDatasets b = build_gpt_datasets(cfg, 32, 7, {100, 10, 0}, MPI_COMM_NULL, 1000);
    ASSERT_TRUE(a.train && a.valid && !a.test);
    EXPECT_EQ(a.train->size(), 100);
    std::vector<std::int32_t> x(33), y(33), z(33);
    a.train->sample(5, x.data());
    b.train->sample(5, y.data());
    a.train->sample(6, z.data());
    EXPECT_EQ(x, y);
    EXPECT_NE(x, z);
    for (auto t : x) EXPECT_TRUE(t >= 0 && t < 1000);
}

TEST(MicroBatchLoader, RanksTakeTheirSliceAndResumeExactly) {
    MockGptDataset ds(64, 4, 1, 50257);
    const int mbs = 2, dp = 3;
    std::vector<std::int32_t> got(mbs * 5), want(5);
    // Rank 1 of 3, from 0: its first micro-batch is samples 2 and 3; the next starts at 6 + 2.
    MicroBatchLoader r1(ds, mbs, 1, dp, 0);
    r1.next(got.data());
    ds.sample(2, want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
    ds.sample(3, want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 5));
    EXPECT_EQ(r1.consumed_samples(), 6);
    r1.next(got.data());
    ds.sample(8, want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
    // A loader resumed at the consumed count continues identically.
    MicroBatchLoader resumed(ds, mbs, 1, dp, r1.consumed_samples());
    std::vector<std::int32_t> a(mbs * 5), b(mbs * 5);
    r1.next(a.data());
    resumed.next(b.data());
    EXPECT_EQ(a, b);
    MicroBatchLoader end(ds, mbs, 0, dp, 60);
    EXPECT_THROW(end.next(a.data()), gpt::DataError);
}

namespace {

// Every sample of a and b agrees (both non-null, same size).
void expect_same_samples(const SampleDataset* a, const SampleDataset* b, const std::string& what) {
    ASSERT_TRUE(a && b) << what;
    ASSERT_EQ(a->size(), b->size()) << what;
    std::vector<std::int32_t> x(a->seq_length() + 1), y(b->seq_length() + 1);
    for (std::int64_t i = 0; i < a->size(); ++i) {
        a->sample(i, x.data());
        b->sample(i, y.data());
        ASSERT_EQ(x, y) << what << ": sample " << i;
    }
}

}  // namespace

// --train/valid/test-data-path read what --data-path X --split giving that split everything
// reads (Megatron's blend_per_split), blends included; --multiple-validation-sets gives one set
// per prefix, named by its file name, each the single set of that prefix.
TEST(GptDataset, PerSplitPathsMatchDataPathAndSplit) {
    const std::string dir = gpt::test::scratch_dir("gpt_per_split");
    const std::string a = make_dataset(dir, "a", 120, 1), b = make_dataset(dir, "b", 80, 2);
    gpt::DataConfig ref;
    ref.data_cache_path = dir + "/cache";
    gpt::DataConfig per = ref;
    per.train_data_path = {"0.3", a, "0.7", b};
    per.valid_data_path = {a};
    per.test_data_path = {b};
    const std::array<std::int64_t, 3> n{200, 40, 20};
    SplitDatasets got = build_split_datasets(per, 12, 42, n, MPI_COMM_WORLD);

    ref.data_path = per.train_data_path;
    ref.split = "100,0,0";
    GptDatasets want = build_gpt_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    expect_same_samples(got.train.get(), want.train.get(), "train blend");
    ref.data_path = {a};
    ref.split = "0,100,0";
    want = build_gpt_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    ASSERT_EQ(got.valid.size(), 1u);
    EXPECT_EQ(got.valid[0].name, "");
    expect_same_samples(got.valid[0].data.get(), want.valid.get(), "valid");
    ref.data_path = {b};
    ref.split = "0,0,100";
    want = build_gpt_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    expect_same_samples(got.test.get(), want.test.get(), "test");

    // Several validation sets, each by name.
    per.multiple_validation_sets = true;
    per.valid_data_path = {a, b};
    got = build_split_datasets(per, 12, 42, n, MPI_COMM_WORLD);
    ASSERT_EQ(got.valid.size(), 2u);
    EXPECT_EQ(got.valid[0].name, "a");
    EXPECT_EQ(got.valid[1].name, "b");
    ref.data_path = {b};
    ref.split = "0,100,0";
    want = build_gpt_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    expect_same_samples(got.valid[1].data.get(), want.valid.get(), "valid set b");

    // Without per-split paths: exactly build_gpt_datasets.
    ref.data_path = {a};
    ref.split = "8,1,1";
    got = build_split_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    want = build_gpt_datasets(ref, 12, 42, n, MPI_COMM_WORLD);
    expect_same_samples(got.train.get(), want.train.get(), "data-path train");
    ASSERT_EQ(got.valid.size(), 1u);
    expect_same_samples(got.valid[0].data.get(), want.valid.get(), "data-path valid");
}
