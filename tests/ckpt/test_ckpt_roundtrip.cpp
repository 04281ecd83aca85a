// Save with one split of the tensors over ranks, load with another (resharding), at 1, 2
// and 4 ranks: boxes by rows, by columns, 3-D blocks, distributed-optimizer flat ranges that
// cross tensor boundaries, fewer or more ranks at load than at save, dtype conversion,
// attributes and per-rank blobs.
#include <gtest/gtest.h>

#include <deque>

#include "ckpt/checkpoint.hpp"
#include "ckpt_test_util.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

using namespace gpt::ckpt::test;

struct Spec {
    int id;
    std::string name;
    Shape shape;
    DType dtype;
};

const std::vector<Spec>& model() {
    static const std::vector<Spec> specs{
        {0, "language_model/embedding/word_embeddings/weight", {50, 12}, DType::BF16},
        {1, "language_model/encoder/layers.0/self_attention/dense/weight", {12, 36}, DType::F16},
        {2, "language_model/encoder/layers.0/input_layernorm/bias", {12}, DType::F32},
        {3, "language_model/encoder/layers.1/mlp/dense_h_to_4h/weight", {3, 5, 7}, DType::F32},
    };
    return specs;
}

// Rows [lo, hi) of dimension `dim`, everything of the others.
Selection split_dim(const Shape& shape, int dim, int part, int parts) {
    auto [lo, hi] = split_range(shape[dim], part, parts);
    Shape off(shape.size(), 0), cnt = shape;
    off[dim] = lo;
    cnt[dim] = hi - lo;
    return Selection::box(off, cnt);
}

// The distributed optimizer's view: all tensors concatenated into one flat fp32 buffer
// whose range [lo, hi) this rank owns; per tensor, the flat piece of it inside [lo, hi).
std::vector<Selection> flat_shard(std::int64_t lo, std::int64_t hi) {
    std::vector<Selection> out;
    std::int64_t base = 0;
    for (const Spec& s : model()) {
        const std::int64_t n = num_elements(s.shape);
        const std::int64_t a = std::clamp(lo - base, std::int64_t{0}, n), b = std::clamp(hi - base, std::int64_t{0}, n);
        out.push_back(b > a ? Selection::flat(a, b - a) : Selection::none());
        base += n;
    }
    return out;
}

std::int64_t flat_total() {
    std::int64_t n = 0;
    for (const Spec& s : model()) n += num_elements(s.shape);
    return n;
}

// Keeps the byte buffers of a batch of slices alive.
struct WriteBatch {
    std::deque<std::vector<unsigned char>> buffers;
    std::vector<TensorSlice> slices;
    void add(const std::string& name, const Spec& s, DType dtype, const Selection& sel, std::int64_t seed) {
        buffers.push_back(to_bytes(packed_values(s.id, s.shape, sel, seed), dtype));
        slices.push_back({name, s.shape, dtype, sel, buffers.back().data()});
    }
};

// The save layout: weights split as TP would (rows, columns, one owner, a 3-D block), and
// fp32 main params and Adam moments as flat shards of one buffer across ranks.
void save_model(MPI_Comm comm, const std::string& dir, std::int64_t iteration, const WriterOptions& opts = {}) {
    const int r = comm_rank(comm), p = comm_size(comm);
    CheckpointWriter w(comm, dir, iteration, opts);
    WriteBatch weights;
    weights.add(model()[0].name, model()[0], model()[0].dtype, split_dim(model()[0].shape, 0, r, p), 0);
    weights.add(model()[1].name, model()[1], model()[1].dtype, split_dim(model()[1].shape, 1, r, p), 0);
    weights.add(model()[2].name, model()[2], model()[2].dtype, r == p - 1 ? Selection::all() : Selection::none(), 0);
    weights.add(model()[3].name, model()[3], model()[3].dtype, split_dim(model()[3].shape, 1, r, p), 0);
    w.write(weights.slices);
    auto [lo, hi] = split_range(flat_total(), r, p);
    const std::vector<Selection> shard = flat_shard(lo, hi);
    WriteBatch optim;
    for (const char* state : {"main_param", "exp_avg", "exp_avg_sq"})
        for (std::size_t i = 0; i < model().size(); ++i)
            optim.add(std::string("optimizer/") + state + "/" + model()[i].name, model()[i], DType::F32, shard[i],
                      1 + (state[0] == 'e') + (state[7] == 's'));
    w.write(optim.slices);
    w.set_attribute("iteration", iteration);
    w.commit();
}

// Reads `sels` of every weight as `dtypes` and compares with the values saved.
void expect_weights(CheckpointReader& reader, const std::vector<Selection>& sels, const std::vector<DType>& dtypes) {
    std::deque<std::vector<unsigned char>> bufs;
    std::vector<TensorSliceOut> out;
    for (std::size_t i = 0; i < model().size(); ++i) {
        const Spec& s = model()[i];
        bufs.emplace_back(sels[i].num_elements(s.shape) * dtype_size(dtypes[i]), 0xEE);
        out.push_back({s.name, s.shape, dtypes[i], sels[i], bufs.back().data()});
    }
    reader.read(out);
    for (std::size_t i = 0; i < model().size(); ++i) {
        const Spec& s = model()[i];
        EXPECT_EQ(from_bytes(bufs[i], dtypes[i]), packed_values(s.id, s.shape, sels[i]))
            << s.name << " read as " << dtype_name(dtypes[i]);
    }
}

void expect_optimizer(CheckpointReader& reader, std::int64_t lo, std::int64_t hi) {
    const std::vector<Selection> shard = flat_shard(lo, hi);
    for (const char* state : {"main_param", "exp_avg", "exp_avg_sq"}) {
        const std::int64_t seed = 1 + (state[0] == 'e') + (state[7] == 's');
        std::deque<std::vector<float>> bufs;
        std::vector<TensorSliceOut> out;
        for (std::size_t i = 0; i < model().size(); ++i) {
            bufs.emplace_back(shard[i].num_elements(model()[i].shape), -1.f);
            out.push_back({std::string("optimizer/") + state + "/" + model()[i].name, model()[i].shape, DType::F32,
                           shard[i], bufs.back().data()});
        }
        reader.read(out);
        for (std::size_t i = 0; i < model().size(); ++i)
            EXPECT_EQ(bufs[i], packed_values(model()[i].id, model()[i].shape, shard[i], seed)) << out[i].name;
    }
}

std::string file_of(const std::string& dir, std::int64_t it) { return checkpoint_file(dir, it).string(); }

TEST(CkptRoundTrip, SameLayoutReadsBackExactly) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_same");
    save_model(MPI_COMM_WORLD, dir, 7);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 7));
    EXPECT_EQ(reader.iteration(), 7);
    EXPECT_EQ(reader.attribute_int("iteration"), 7);
    EXPECT_EQ(reader.tensor_names().size(), 16u);
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    expect_weights(reader,
                   {split_dim(model()[0].shape, 0, r, p), split_dim(model()[1].shape, 1, r, p),
                    r == p - 1 ? Selection::all() : Selection::none(), split_dim(model()[3].shape, 1, r, p)},
                   {DType::BF16, DType::F16, DType::F32, DType::F32});
    auto [lo, hi] = split_range(flat_total(), r, p);
    expect_optimizer(reader, lo, hi);
}

TEST(CkptRoundTrip, ReshardsToOtherSplitsAndOverlappingReplicas) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_reshard");
    save_model(MPI_COMM_WORLD, dir, 8);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 8));
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    // Rows <-> columns swapped, the bias replicated on every rank, the 3-D tensor as flat ranges.
    auto [f_lo, f_hi] = split_range(num_elements(model()[3].shape), r, p);
    expect_weights(reader,
                   {split_dim(model()[0].shape, 1, r, p), split_dim(model()[1].shape, 0, r, p), Selection::all(),
                    Selection::flat(f_lo, f_hi - f_lo)},
                   {DType::BF16, DType::F16, DType::F32, DType::F32});
    // Another data-parallel split of the flat buffer: uneven, boundaries inside rows.
    const std::int64_t n = flat_total();
    expect_optimizer(reader, n * r * r / (p * p), n * (r + 1) * (r + 1) / (p * p));
}

TEST(CkptRoundTrip, DistributedOptimizerShardsOfTensorParallelSlices) {
    // TP x DP grid (Megatron order: tp fastest). The row-parallel weight is split by columns
    // over TP; each TP slice's flat fp32 buffer is split over DP. Saved as ranges of the
    // slices, loaded as plain flat ranges of the global tensor by a pure-DP layout.
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_tpdp");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const int tp = p % 2 == 0 ? 2 : 1, dp = p / tp, tr = r % tp, dr = r / tp;
    const Spec& s = model()[1];  // [12, 36]
    const Selection slice = split_dim(s.shape, 1, tr, tp);
    auto [lo, hi] = split_range(slice.num_elements(s.shape), dr, dp);
    const Selection shard = Selection::flat_in_box(slice.offset(), slice.count(), lo, hi - lo);
    const std::string name = "optimizer/exp_avg/" + s.name;
    {
        CheckpointWriter w(MPI_COMM_WORLD, dir, 13);
        const std::vector<float> v = packed_values(s.id, s.shape, shard, 2);
        w.write({{name, s.shape, DType::F32, shard, v.data()}});
        w.commit();
    }
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 13));
    auto [a, b] = split_range(num_elements(s.shape), p - 1 - r, p);  // reversed rank order, too
    const Selection flat = Selection::flat(a, b - a);
    std::vector<float> got(b - a);
    reader.read({{name, s.shape, DType::F32, flat, got.data()}});
    EXPECT_EQ(got, packed_values(s.id, s.shape, flat, 2));
    // And the same TP x DP layout reads its own shards back.
    std::vector<float> own(hi - lo);
    reader.read({{name, s.shape, DType::F32, shard, own.data()}});
    EXPECT_EQ(own, packed_values(s.id, s.shape, shard, 2));
}

TEST(CkptRoundTrip, EveryIoModeAndReadPathWritesAndReadsTheSameData) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const std::vector<Selection> sels{split_dim(model()[0].shape, 1, r, p), split_dim(model()[1].shape, 0, r, p),
                                      Selection::all(), split_dim(model()[3].shape, 2, r, p)};
    for (IoMode save_mode : {IoMode::Collective, IoMode::Independent}) {
        const std::string dir = gpt::test::scratch_dir("ckpt_rt_mode" + std::to_string(int(save_mode)));
        WriterOptions wo;
        wo.io_mode = save_mode;
        save_model(MPI_COMM_WORLD, dir, 14, wo);
        // Independent reads through pread at HDF5's offsets (the default) and through H5Dread.
        for (IoMode load_mode : {IoMode::Auto, IoMode::Collective, IoMode::Independent})
            for (bool direct : {true, false}) {
                ReaderOptions ro;
                ro.io_mode = load_mode;
                ro.direct_reads = direct;
                CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 14), ro);
                expect_weights(reader, sels, {DType::BF16, DType::F16, DType::F32, DType::F32});
                auto [lo, hi] = split_range(flat_total(), p - 1 - r, p);
                expect_optimizer(reader, lo, hi);
                reader.verify_all();  // the full pass, through either path
            }
    }
}

TEST(CkptRoundTrip, LargePiecesAreStreamedInChunks) {
    // Each rank's piece is larger than the 4 MiB I/O chunk and starts at an odd element, so
    // writes and reads (and their checksums) are split into several pieces.
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_large");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const Shape shape{1301 * p + 7, 1024};
    const std::int64_t n = num_elements(shape);
    auto [lo, hi] = split_range(n, r, p);
    const Selection mine = Selection::flat(lo, hi - lo);
    {
        const std::vector<float> v = packed_values(9, shape, mine, 5);
        CheckpointWriter w(MPI_COMM_WORLD, dir, 15);
        w.write({{"big/weight", shape, DType::F32, mine, v.data()}});
        w.commit();
    }
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 15));
    auto [r0, r1] = split_range(shape[0], p - 1 - r, p);
    const Selection rows = Selection::box({r0, 0}, {r1 - r0, shape[1]});
    std::vector<float> got(rows.num_elements(shape));
    reader.read({{"big/weight", shape, DType::F32, rows, got.data()}});
    EXPECT_EQ(got, packed_values(9, shape, rows, 5));
    std::vector<unsigned char> half(rows.num_elements(shape) * 2);
    reader.read({{"big/weight", shape, DType::BF16, rows, half.data()}});
    EXPECT_EQ(from_bytes(half, DType::BF16), packed_values(9, shape, rows, 5));
}

TEST(CkptRoundTrip, ConvertsBetweenFloatTypes) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_convert");
    save_model(MPI_COMM_WORLD, dir, 9);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 9));
    const bool root = comm_rank(MPI_COMM_WORLD) == 0;
    const Selection whole = root ? Selection::all() : Selection::none();
    // bf16 -> fp32, fp16 -> bf16, fp32 -> fp16: the saved values are exact in every type.
    expect_weights(reader, {whole, whole, whole, whole}, {DType::F32, DType::BF16, DType::F16, DType::BF16});
}

TEST(CkptRoundTrip, FewerRanksSaveThanLoad) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_grow");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const int savers = (p + 1) / 2;
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, r < savers ? 0 : MPI_UNDEFINED, r, &sub);
    if (sub != MPI_COMM_NULL) {
        save_model(sub, dir, 11);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 11));
    EXPECT_EQ(reader.saved_world_size(), savers);
    expect_weights(reader,
                   {split_dim(model()[0].shape, 1, r, p), split_dim(model()[1].shape, 1, r, p),
                    split_dim(model()[2].shape, 0, r, p), split_dim(model()[3].shape, 2, r, p)},
                   {DType::BF16, DType::F16, DType::F32, DType::F32});
    auto [lo, hi] = split_range(flat_total(), r, p);
    expect_optimizer(reader, lo, hi);
}

TEST(CkptRoundTrip, AllRanksSaveOneRankLoadsWhole) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_shrink");
    save_model(MPI_COMM_WORLD, dir, 12);
    if (comm_rank(MPI_COMM_WORLD) == 0) {
        CheckpointReader reader(MPI_COMM_SELF, file_of(dir, 12));
        const Selection all = Selection::all();
        expect_weights(reader, {all, all, all, all}, {DType::BF16, DType::F16, DType::F32, DType::F32});
        expect_optimizer(reader, 0, flat_total());
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CkptRoundTrip, AttributesComeFromRankZeroAndBlobsPerRank) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_attrs");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const std::string config = "[model]\nnum-layers = 2\nhidden-size = 12\n";
    {
        CheckpointWriter w(MPI_COMM_WORLD, dir, 30);
        // Other ranks set different values: the checkpoint must hold rank 0's.
        w.set_attribute("consumed_samples", std::int64_t{4096} + r);
        w.set_attribute("loss_scale", 65536.0 / (r + 1));
        w.set_attribute("config", r == 0 ? config : std::string("wrong"));
        w.set_attribute("empty", std::string());
        std::vector<unsigned char> rng(10 + 3 * r);
        for (std::size_t i = 0; i < rng.size(); ++i) rng[i] = static_cast<unsigned char>(r * 40 + i);
        w.write_rank_blob("rng_state", rng.data(), rng.size());
        // A rank with nothing to say: only rank 0 stores a data-loader position.
        std::int64_t pos = 777;
        w.write_rank_blob("loader", &pos, r == 0 ? sizeof pos : 0);
        w.commit();
    }
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 30));
    EXPECT_EQ(reader.attribute_int("consumed_samples"), 4096);
    EXPECT_EQ(reader.attribute_double("loss_scale"), 65536.0);
    EXPECT_EQ(reader.attribute_string("config"), config);
    EXPECT_EQ(reader.attribute_string("empty"), "");
    EXPECT_THROW(reader.attribute_string("consumed_samples"), DataError);
    EXPECT_THROW(reader.attribute_int("absent"), DataError);
    EXPECT_TRUE(reader.tensor_names().empty());
    ASSERT_TRUE(reader.has_rank_blob("rng_state"));
    const int source = (r + 1) % p;
    const std::vector<std::byte> blob = reader.read_rank_blob("rng_state", source);
    ASSERT_EQ(blob.size(), 10u + 3 * source);
    for (std::size_t i = 0; i < blob.size(); ++i) EXPECT_EQ(static_cast<unsigned char>(blob[i]), source * 40 + i);
    const std::vector<std::byte> loader = reader.read_rank_blob("loader", 0);
    ASSERT_EQ(loader.size(), sizeof(std::int64_t));
    std::int64_t pos = 0;
    std::memcpy(&pos, loader.data(), sizeof pos);
    EXPECT_EQ(pos, 777);
    EXPECT_THROW(reader.read_rank_blob("rng_state", p), InternalError);
}

TEST(CkptRoundTrip, WriterRejectsInconsistentSlices) {
    const std::string dir = gpt::test::scratch_dir("ckpt_rt_bad");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const Spec& s = model()[2];
    const std::vector<float> v = packed_values(s.id, s.shape, Selection::all());
    CheckpointWriter w(MPI_COMM_WORLD, dir, 1);
    // A gap: nobody writes the last element.
    const std::int64_t n = num_elements(s.shape);
    auto [lo, hi] = split_range(n - 1, r, p);
    EXPECT_THROW(w.write({{s.name, s.shape, DType::F32, Selection::flat(lo, hi - lo), v.data()}}), InternalError);
    if (p > 1) {  // replicas that do not select none: every element twice
        EXPECT_THROW(w.write({{s.name, s.shape, DType::F32, Selection::all(), v.data()}}), InternalError);
        // Ranks disagree on the tensor list.
        const Shape other{r == 0 ? 12 : 13};
        EXPECT_THROW(w.write({{"x", other, DType::F32, Selection::none(), nullptr}}), InternalError);
    }
    EXPECT_THROW(w.write({{"bad name", s.shape, DType::F32, Selection::none(), nullptr}}), InternalError);
    // Nothing was published: the tracker does not exist.
    EXPECT_FALSE(read_tracker(dir).has_value());
}

}  // namespace
}  // namespace gpt::ckpt
