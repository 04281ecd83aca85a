#include "data/gpt_dataset.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <sstream>
#include <thread>

#include "core/errors.hpp"
#include "dist/comm_mpi.hpp"
#include "data/commit_queue.hpp"
#include "data/gpt_indices.hpp"
#include "data/indexed_dataset.hpp"
#include "data/large_array.hpp"
#include "data/temp_files.hpp"
#include "log/log.hpp"

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

namespace {

// A spec checked and resolved: the split's tokens, its epochs, and its cache file's
// description (everything the arrays depend on) and path. The same on every rank.
struct SplitPlan {
    std::int64_t tokens = 0;
    EpochPlan epochs;
    std::string description, path;
};

constexpr const char* kCacheSuffix = "-indices.bin";

std::string cache_folder(const SplitSpec& s) {
    return s.cache_dir.empty() ? s.data->prefix() + "/cache/GPTDataset_indices" : s.cache_dir;
}

SplitPlan plan_split(const SplitSpec& s) {
    const IndexedDataset& data = *s.data;
    if (s.seq_length < 1) GPT_THROW(UsageError, "seq-length must be >= 1, got ", s.seq_length);
    if (s.num_samples < 0) GPT_THROW(UsageError, "negative sample count ", s.num_samples);
    GPT_ASSERT(s.first >= 0 && s.first <= s.last && s.last <= data.num_sequences(), "sequences [", s.first, ", ",
               s.last, ") of ", data.num_sequences());
    SplitPlan p;
    p.tokens = data.tokens_in(s.first, s.last);
    // Megatron loops forever on an empty split (its epoch count never reaches the request).
    if (p.tokens == 0)
        GPT_THROW(DataError, "the ", s.split_name, " split of '", data.prefix(), "' is empty (sequences [", s.first,
                  ", ", s.last, ") of ", data.num_sequences(), ", 0 tokens) but must give ", s.num_samples,
                  " samples of ", s.seq_length, " tokens; give it data (a larger corpus or share in --split) or ask "
                  "for no ", s.split_name, " samples");
    p.epochs = plan_epochs(p.tokens, s.seq_length, s.num_samples);
    // Megatron holds the document index in int32: a split far smaller than the request would
    // need more epochs than memory holds.
    if (s.last > std::numeric_limits<std::int32_t>::max())
        GPT_THROW(DataError, "dataset '", data.prefix(), "' holds ", data.num_sequences(),
                  " sequences; the document index (32-bit, as Megatron's) addresses at most 2^31 - 1: split the "
                  "corpus into several datasets and blend them");
    const std::int64_t entries = (s.last - s.first) * p.epochs.num_epochs;
    if (entries > std::numeric_limits<std::int32_t>::max())
        GPT_THROW(DataError, "the ", s.split_name, " split of '", data.prefix(), "' holds ", p.tokens, " tokens: ",
                  s.num_samples, " samples of ", s.seq_length, " tokens need ", p.epochs.num_epochs,
                  " epochs of it, a document index of ", entries, " entries; give it more data or ask for fewer samples");
    std::ostringstream desc;
    desc << "GPTDataset indices v3\nprefix " << data.prefix() << "\nsequences " << data.num_sequences()
         << "\nbin_bytes " << data.bin_size() << "\nsplit " << s.split_name << " [" << s.first << ", " << s.last
         << ")\nseq_length " << s.seq_length << "\nseed " << s.seed << "\nnum_samples " << s.num_samples << "\n";
    p.description = desc.str();
    p.path = (std::filesystem::path(cache_folder(s)) /
              (description_hash(p.description) + "-GPTDataset-" + s.split_name + kCacheSuffix))
                 .string();
    return p;
}

template <typename T>
std::vector<T> shuffle_index_of(const SplitSpec& s, const SplitPlan& p, std::int64_t total, IndexShuffler rng) {
    skip_document_index(s.first, s.last, p.epochs, rng);
    const std::int64_t first_part = p.epochs.separate_final_epoch ? p.epochs.samples_sans_final_epoch : total;
    return build_shuffle_index<T>(first_part, total, rng);
}

// Builds the split's arrays and writes each as soon as it exists. A large split draws its
// shuffle index on a second thread (its engine skipped past the document shuffle's draws, so
// the values are the one-thread build's) while this one builds the document and sample indices.
template <typename T>
void build_and_write(const SplitSpec& s, const SplitPlan& p, std::int64_t total, IndexCacheWriter& out) {
    const IndexShuffler seeded(s.seed);
    const std::int64_t entries = (s.last - s.first) * p.epochs.num_epochs;
    std::future<std::vector<T>> shuffle;
    const bool large = entries + total >= (std::int64_t{1} << 20);
    if (large)
        shuffle = std::async(std::launch::async, [&] { return shuffle_index_of<T>(s, p, total, seeded); });
    IndexShuffler rng = seeded;
    {
        DocumentOrder order = build_document_order(s.first, s.last, p.epochs, rng,
                                                   [&](std::int64_t seq) { return s.data->sequence_length(seq); });
        // Both arrays are written as they are produced, a megabyte at a time (the document index
        // from the packed entries, the sample index as it is walked), so the disk writes them
        // back meanwhile and the fsync has only the last piece left.
        constexpr std::int64_t kPiece = std::int64_t{1} << 17;  // samples: 1 MB of entries
        LargeArray<std::int32_t> piece(static_cast<std::size_t>(
            std::min(2 * kPiece, std::max<std::int64_t>({2 * total, static_cast<std::int64_t>(order.size()), 2}))));
        for (std::size_t done = 0; done < order.size();) {
            const std::size_t n = std::min(piece.size(), order.size() - done);
            for (std::size_t k = 0; k < n; ++k) piece[k] = order.document(done + k);
            out.append(piece.data(), n);
            done += n;
        }
        const std::int32_t* lengths = order.pack_lengths();
        const std::int32_t origin[2] = {0, 0};  // sample 0 starts at the first document's first token
        out.append(origin, 2);
        SampleIndexWalker walk(lengths, static_cast<std::int64_t>(order.size()), s.seq_length);
        for (std::int64_t done = 0; done < total;) {
            const std::int64_t n = std::min(kPiece, total - done);
            walk.next(n, piece.data());
            out.append(piece.data(), static_cast<std::size_t>(2 * n));
            done += n;
        }
    }
    if (shuffle.valid()) {
        out.append(shuffle.get());
    } else {
        const std::int64_t first_part = p.epochs.separate_final_epoch ? p.epochs.samples_sans_final_epoch : total;
        out.append(build_shuffle_index<T>(first_part, total, rng));
    }
}

// Builds and writes the split's cache file, then commits it (fsync, rename into place): now,
// or through `later` (which calls on_done once it is in place).
struct Commit {
    CommitQueue* later = nullptr;
    std::function<void()> on_done;
};
void build_and_write(const SplitSpec& s, const SplitPlan& p, const Commit& commit) {
    const std::int64_t total = (p.epochs.num_epochs * p.tokens - 1) / s.seq_length;
    const bool wide = IndexCacheWriter::needs_wide_shuffle(total);
    IndexCacheWriter out(p.path, p.description, p.epochs.num_epochs, (s.last - s.first) * p.epochs.num_epochs,
                         2 * (total + 1), total, wide);
    if (wide)
        build_and_write<std::int64_t>(s, p, total, out);
    else
        build_and_write<std::int32_t>(s, p, total, out);
    if (commit.later)
        commit.later->add(out.finish(), out.path(), commit.on_done);
    else
        out.commit();
}

// The builder's part: keeps a whole file of this description, else builds and writes it.
// Returns whether it wrote the file (committed, or handed to commit.later).
bool ensure_cache(const SplitSpec& s, const SplitPlan& p, bool folder_scanned = false, const Commit& commit = {}) {
    if (std::filesystem::exists(p.path)) {
        try {
            MappedIndexCache check(p.path, p.description);
            return false;
        } catch (const DataError& e) {
            GPT_LOG(warning) << e.what() << "; rebuilding it";
        }
    }
    if (!folder_scanned) remove_stale_temp_files(p.path);  // a builder killed on this host
    try {
        build_and_write(s, p, commit);
    } catch (const IoError& e) {
        // Data folders are often read-only on clusters (Megatron says the same).
        GPT_THROW(IoError, e.what(), s.cache_dir.empty() ? " (the index cache goes next to the data by default: "
                                                            "give --data-cache-path a writable folder)" : "");
    }
    return true;
}

}  // namespace

std::vector<std::string> build_index_caches(const std::vector<SplitSpec>& specs) {
    const std::size_t threads = std::min<std::size_t>(
        specs.size(), std::clamp<std::size_t>(2 * std::thread::hardware_concurrency(), 2, 8));
    // A builder killed on this host left temporaries: one pass over each folder removes them
    // (not one per file: a blend of hundreds of datasets shares one folder).
    std::vector<std::string> folders;
    for (const SplitSpec& s : specs) folders.push_back(cache_folder(s));
    std::sort(folders.begin(), folders.end());
    folders.erase(std::unique(folders.begin(), folders.end()), folders.end());
    for (const std::string& dir : folders) remove_stale_temp_files_in(dir, kCacheSuffix);
    std::vector<std::string> built(specs.size());  // "" where nothing was written
    // The fsyncs wait on the disk, not a core: more of them at once than builders.
    CommitQueue commits(2 * threads);
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        for (std::size_t i = next++; i < specs.size(); i = next++) {
            try {
                const SplitPlan plan = plan_split(specs[i]);
                ensure_cache(specs[i], plan, true, Commit{&commits, [&built, i, path = plan.path] { built[i] = path; }});
            } catch (...) {
                // Raised again, on every rank, when GptDataset opens this split (a file whose
                // commit failed too: it is not in `built`, so that open rebuilds it).
            }
        }
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    commits.finish();
    std::vector<std::string> out;
    for (auto& path : built)
        if (!path.empty()) out.push_back(std::move(path));
    return out;
}

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, const std::string& split_name, std::int64_t first,
                       std::int64_t last, int seq_length, std::uint64_t seed, std::int64_t num_samples,
                       const std::string& cache_dir, MPI_Comm comm, const std::vector<std::string>& built_here)
    : data_(std::move(data)), seq_length_(seq_length) {
    const SplitSpec spec{data_, split_name, first, last, seq_length, seed, num_samples, cache_dir};
    SplitPlan plan = plan_split(spec);
    const bool ours = std::find(built_here.begin(), built_here.end(), plan.path) != built_here.end();
    on_root_then_share(comm, [&] { built_ = ours || ensure_cache(spec, plan); });
    first_ = first;
    tokens_ = plan.tokens;
    cache_path_ = plan.path;
    cache_ = MappedIndexCache(cache_path_, plan.description);  // the framing is checked either way
    if (!ours) validate(first, last, num_samples);
}

void GptDataset::validate(std::int64_t first, std::int64_t last, std::int64_t num_samples) const {
    // A cache file is input like any other: check it before trusting its offsets.
    auto corrupt = [&](const std::string& what) {
        GPT_THROW(DataError, "index cache file '", cache_path_, "' is corrupt (", what, "); delete it to rebuild");
    };
    const IndexView& doc = cache_.document_index();
    const IndexView& smp = cache_.sample_index();
    const IndexView& shf = cache_.shuffle_index();
    const std::int64_t docs = last - first;
    if (cache_.num_epochs() < 1 || doc.size() != docs * cache_.num_epochs()) corrupt("document index of wrong length");
    for (std::int64_t i = 0; i < doc.size(); ++i)
        if (doc[i] < first || doc[i] >= last) corrupt("document index entry out of range");
    const std::int64_t n = smp.size();
    if (n < 2 || n % 2 != 0) corrupt("sample index of wrong length");
    const std::int64_t total = n / 2 - 1;
    // Megatron's builder asserts the same: the split gives at least the samples asked of it.
    if (total < num_samples) corrupt("it holds " + std::to_string(total) + " samples, fewer than the " +
                                     std::to_string(num_samples) + " asked");
    constexpr std::int64_t kAhead = 32;  // each length is a cache miss: prefetched as in build_sample_index
    for (std::int64_t i = 0; i <= total; ++i) {
        if (i + kAhead <= total) {
            const std::int64_t ahead = smp[2 * (i + kAhead)];
            if (ahead >= 0 && ahead < doc.size() && doc[ahead] >= first && doc[ahead] < last)
                data_->prefetch_sequence_length(doc[ahead]);
        }
        const std::int64_t pos = smp[2 * i], off = smp[2 * i + 1];
        if (pos < 0 || pos >= doc.size() || off < 0 || off >= data_->sequence_length(doc[pos]) + (i == 0 ? 1 : 0))
            corrupt("sample index entry out of range");
        if (i > 0 && (pos < smp[2 * i - 2] || (pos == smp[2 * i - 2] && off <= smp[2 * i - 1])))
            corrupt("sample index entries out of order");
    }
    if (shf.size() != total) corrupt("shuffle index of wrong length");
    for (std::int64_t i = 0; i < total; ++i)
        if (shf[i] < 0 || shf[i] >= total) corrupt("shuffle index entry out of range");
}

void GptDataset::sample(std::int64_t index, std::int32_t* out) const {
    GPT_ASSERT(index >= 0 && index < size(), "sample ", index, " of ", size());
    const IndexView& document_index_ = cache_.document_index();
    const IndexView& sample_index_ = cache_.sample_index();
    const std::int64_t s = cache_.shuffle_index()[index];
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
