#include "data/gpt_dataset.hpp"

#include <filesystem>
#include <sstream>

#include "core/errors.hpp"
#include "dist/comm_mpi.hpp"
#include "data/gpt_indices.hpp"
#include "data/indexed_dataset.hpp"

namespace gpt::data {

namespace {

// Runs fn on rank 0 of comm only, then shares its success or failure with every rank, so a
// failure on rank 0 becomes an error on all ranks instead of a hang.
template <typename Fn>
void on_root_then_share(MPI_Comm comm, Fn&& fn) {
    int rank = 0;
    if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
    std::string error;
    if (rank == 0) {
        try {
            fn();
        } catch (const Error& e) {
            error = e.what();
            if (error.empty()) error = "unknown error";
        }
    }
    if (comm != MPI_COMM_NULL) {
        // Through the project's one wait (it yields the core while rank 0 builds the index).
        int len = static_cast<int>(error.size());
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Ibcast(&len, 1, MPI_INT, 0, comm, &req);
        GPT_REQUIRE(dist::wait_request(req, "the index build's broadcast") == MPI_SUCCESS, CommError,
                    "broadcasting rank 0's index build result failed");
        error.resize(static_cast<std::size_t>(len));
        if (len > 0) {
            MPI_Ibcast(error.data(), len, MPI_CHAR, 0, comm, &req);
            GPT_REQUIRE(dist::wait_request(req, "the index build's broadcast") == MPI_SUCCESS, CommError,
                        "broadcasting rank 0's index build error failed");
        }
    }
    if (!error.empty()) GPT_THROW(DataError, rank == 0 ? "" : "rank 0 failed: ", error);
}

}  // namespace

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, const std::string& split_name, std::int64_t first,
                       std::int64_t last, int seq_length, std::uint64_t seed, std::int64_t num_samples,
                       const std::string& cache_dir, MPI_Comm comm)
    : data_(std::move(data)), seq_length_(seq_length) {
    if (seq_length < 1) GPT_THROW(UsageError, "seq-length must be >= 1, got ", seq_length);
    if (first < 0 || last > data_->num_sequences() || first >= last)
        GPT_THROW(DataError, "the ", split_name, " split of '", data_->prefix(), "' is empty (sequences [", first, ", ",
                  last, ") of ", data_->num_sequences(), "); check --split");
    if (num_samples < 0) GPT_THROW(UsageError, "negative sample count ", num_samples);
    std::int64_t tokens = 0;
    for (std::int64_t i = first; i < last; ++i) tokens += data_->sequence_length(i);
    const EpochPlan plan = plan_epochs(tokens, seq_length, num_samples);
    num_epochs_ = plan.num_epochs;

    // Everything the three arrays depend on; a different value names different cache files.
    std::ostringstream desc;
    desc << "GPTDataset indices v1\nprefix " << data_->prefix() << "\nsequences " << data_->num_sequences()
         << "\nbin_bytes " << data_->bin_size() << "\nsplit " << split_name << " [" << first << ", " << last
         << ")\nseq_length " << seq_length << "\nseed " << seed << "\nnum_samples " << num_samples << "\n";
    const std::string dir = cache_dir.empty() ? data_->prefix() + "/cache/GPTDataset_indices" : cache_dir;
    cache_prefix_ = (std::filesystem::path(dir) / (description_hash(desc.str()) + "-GPTDataset-" + split_name + "-")).string();

    on_root_then_share(comm, [&] {
        namespace fs = std::filesystem;
        if (fs::exists(cache_prefix_ + "document_index.bin") && fs::exists(cache_prefix_ + "sample_index.bin") &&
            fs::exists(cache_prefix_ + "shuffle_index.bin"))
            return;
        build_cache_files(first, last, seed, num_samples);
    });
    document_index_ = MappedIndexArray(cache_prefix_ + "document_index.bin");
    sample_index_ = MappedIndexArray(cache_prefix_ + "sample_index.bin");
    shuffle_index_ = MappedIndexArray(cache_prefix_ + "shuffle_index.bin");
    validate(first, last);
}

void GptDataset::build_cache_files(std::int64_t first, std::int64_t last, std::uint64_t seed, std::int64_t num_samples) const {
    std::int64_t tokens = 0;
    for (std::int64_t i = first; i < last; ++i) tokens += data_->sequence_length(i);
    const EpochPlan plan = plan_epochs(tokens, seq_length_, num_samples);
    IndexShuffler rng(seed);
    const std::vector<std::int64_t> doc_index = build_document_index(first, last, plan, rng);
    const std::int64_t total = (plan.num_epochs * tokens - 1) / seq_length_;
    const std::vector<std::int64_t> sample_index = build_sample_index(
        [&](std::int64_t seq) { return data_->sequence_length(seq); }, doc_index, seq_length_, total);
    const std::int64_t first_part = plan.separate_final_epoch ? plan.samples_sans_final_epoch : total;
    const std::vector<std::int64_t> shuffle_index = build_shuffle_index(first_part, total, rng);
    write_index_array(cache_prefix_ + "document_index.bin", doc_index);
    write_index_array(cache_prefix_ + "sample_index.bin", sample_index);
    write_index_array(cache_prefix_ + "shuffle_index.bin", shuffle_index);
}

void GptDataset::validate(std::int64_t first, std::int64_t last) const {
    // A cache file is input like any other: check it before trusting its offsets.
    auto corrupt = [](const MappedIndexArray& a, const std::string& what) {
        GPT_THROW(DataError, "index cache file '", a.path(), "' is corrupt (", what, "); delete it to rebuild");
    };
    const std::int64_t docs = last - first;
    if (document_index_.size() != docs * num_epochs_) corrupt(document_index_, "wrong length");
    for (std::int64_t i = 0; i < document_index_.size(); ++i)
        if (document_index_[i] < first || document_index_[i] >= last) corrupt(document_index_, "entry out of range");
    const std::int64_t n = sample_index_.size();
    if (n < 4 || n % 2 != 0) corrupt(sample_index_, "wrong length");
    const std::int64_t total = n / 2 - 1;
    for (std::int64_t i = 0; i <= total; ++i) {
        const std::int64_t pos = sample_index_[2 * i], off = sample_index_[2 * i + 1];
        if (pos < 0 || pos >= document_index_.size() || off < 0 ||
            off >= data_->sequence_length(document_index_[pos]) + (i == 0 ? 1 : 0))
            corrupt(sample_index_, "entry out of range");
        if (i > 0 && (pos < sample_index_[2 * i - 2] || (pos == sample_index_[2 * i - 2] && off <= sample_index_[2 * i - 1])))
            corrupt(sample_index_, "entries out of order");
    }
    if (shuffle_index_.size() != total) corrupt(shuffle_index_, "wrong length");
    for (std::int64_t i = 0; i < total; ++i)
        if (shuffle_index_[i] < 0 || shuffle_index_[i] >= total) corrupt(shuffle_index_, "entry out of range");
}

void GptDataset::sample(std::int64_t index, std::int32_t* out) const {
    GPT_ASSERT(index >= 0 && index < size(), "sample ", index, " of ", size());
    const std::int64_t s = shuffle_index_[index];
    const std::int64_t p0 = sample_index_[2 * s], o0 = sample_index_[2 * s + 1];
    const std::int64_t p1 = sample_index_[2 * s + 2], o1 = sample_index_[2 * s + 3];
    std::int64_t written = 0;
    if (p0 == p1) {
        written = o1 - o0 + 1;
        data_->read(document_index_[p0], o0, written, out);
    } else {
        for (std::int64_t p = p0; p <= p1; ++p) {
            const std::int64_t seq = document_index_[p];
            const std::int64_t begin = p == p0 ? o0 : 0;
            const std::int64_t end = p == p1 ? o1 + 1 : data_->sequence_length(seq);
            data_->read(seq, begin, end - begin, out + written);
            written += end - begin;
        }
    }
    GPT_ASSERT(written == seq_length_ + 1, "sample ", index, " has ", written, " tokens");
}

}  // namespace gpt::data
