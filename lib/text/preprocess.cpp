#include "text/preprocess.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/errors.hpp"
#include "core/wait.hpp"
#include "core/timer.hpp"
#include "text/corpus_reader.hpp"
#include "text/text_tokenizer.hpp"
#include "data/indexed_dataset.hpp"
#include "text/json.hpp"
#include "text/utf8.hpp"

namespace gpt::data {

namespace {

enum class LineStatus : std::uint8_t { Ok, Blank, Bad };

// The encoded form of one batch, per key: every sequence's ids back to back.
struct EncodedBatch {
    std::int64_t seq = 0;
    std::size_t file = 0;
    std::int64_t first_line = 0;
    std::int64_t bytes = 0;
    std::vector<LineStatus> status;
    std::vector<std::string> errors;               // one per Bad line, in order
    struct Key {
        std::vector<std::int32_t> ids;
        std::vector<std::int32_t> seq_lengths;
        std::vector<std::uint32_t> seqs_per_line;  // per Ok line
    };
    std::vector<Key> keys;
};

bool is_blank(std::string_view line) {
    for (char c : line)
        if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
    return true;
}

// Encodes one batch; per-line problems become Bad entries, never exceptions.
class BatchEncoder {
public:
    BatchEncoder(const TextTokenizer& tok, const PreprocessOptions& opt) : tok_(tok), opt_(opt), enc_(tok.make_encoder()) {}

    void encode(const LineBatch& in, EncodedBatch& out) {
        out.seq = in.seq;
        out.file = in.file;
        out.first_line = in.first_line;
        out.bytes = in.bytes;
        out.keys.assign(opt_.json_keys.size(), EncodedBatch::Key{});
        for (std::size_t k = 0; k < in.size(); ++k) {
            std::string_view line = in.line(k);
            if (is_blank(line)) {
                out.status.push_back(LineStatus::Blank);
                continue;
            }
            std::string error = encode_line(line, out);
            if (error.empty()) {
                out.status.push_back(LineStatus::Ok);
            } else {
                out.status.push_back(LineStatus::Bad);
                out.errors.push_back(std::move(error));
            }
        }
    }

private:
    std::string encode_line(std::string_view line, EncodedBatch& out) {
        std::size_t bad = utf8::find_invalid(line);
        if (bad != std::string_view::npos) return "invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the line";
        try {
            parse_corpus_line(line, opt_.json_keys, fields_);
        } catch (const DataError& e) {
            return std::string("bad JSON line: ") + e.what();
        }
        for (std::size_t k = 0; k < fields_.size(); ++k)
            if (!fields_[k].present)
                return "no key '" + opt_.json_keys[k] + "' in the JSON object (see --json-keys)";
        for (std::size_t k = 0; k < fields_.size(); ++k) {
            EncodedBatch::Key& key = out.keys[k];
            std::uint32_t seqs = 0;
            for (std::size_t p = 0; p < fields_[k].count; ++p) {
                std::size_t before = key.ids.size();
                enc_->encode(fields_[k].parts[p], key.ids);
                if (key.ids.size() > before) {
                    key.seq_lengths.push_back(static_cast<std::int32_t>(key.ids.size() - before));
                    ++seqs;
                }
            }
            // Megatron appends the EOD to the document's last non-empty sequence only.
            if (seqs > 0 && opt_.append_eod) {
                key.ids.push_back(tok_.eod());
                ++key.seq_lengths.back();
            }
            key.seqs_per_line.push_back(seqs);
        }
        return {};
    }

    const TextTokenizer& tok_;
    const PreprocessOptions& opt_;
    std::unique_ptr<TextEncoder> enc_;
    std::vector<TextField> fields_;
};

// Shared state of reader -> workers -> writer. The reader may run at most max_inflight
// batches ahead of the writer, which bounds memory whatever the input size.
struct Pipeline {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<LineBatch>> todo;
    std::map<std::int64_t, std::unique_ptr<EncodedBatch>> done;
    std::int64_t inflight = 0;
    std::int64_t max_inflight = 0;
    bool reader_finished = false;
    std::int64_t total_batches = -1;
    bool stop = false;
    std::exception_ptr error;

    void fail(std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = e;
        stop = true;
        cv.notify_all();
    }
};

std::string format_rate(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f", v);
    return buf;
}

}  // namespace

std::string output_prefix_for_key(const std::string& prefix, const std::string& key) {
    return prefix + "_" + key + "_document";
}

PreprocessResult preprocess_corpus(const PreprocessOptions& opt, const TextTokenizer& tok, const PreprocessLog& log) {
    if (opt.workers < 1) GPT_THROW(UsageError, "--workers must be >= 1, got ", opt.workers);
    if (opt.chunk_size < 1) GPT_THROW(UsageError, "--chunk-size must be >= 1, got ", opt.chunk_size);
    if (opt.json_keys.empty()) GPT_THROW(UsageError, "--json-keys needs at least one key");
    if (opt.output_prefix.empty()) GPT_THROW(UsageError, "--output-prefix is required");
    const std::vector<std::string> files = expand_input_paths(opt.inputs);
    for (const auto& f : files)
        if (log.info) log.info("Opening " + f);

    PreprocessResult result;
    const TokenDType dtype = best_fitting_dtype(tok.vocab_size());
    std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
    for (const auto& key : opt.json_keys) {
        result.output_prefixes.push_back(output_prefix_for_key(opt.output_prefix, key));
        if (log.info) log.info("Output prefix: " + result.output_prefixes.back());
        writers.push_back(std::make_unique<IndexedDatasetWriter>(result.output_prefixes.back(), dtype));
    }

    Pipeline pl;
    pl.max_inflight = 4 * static_cast<std::int64_t>(opt.workers) + 2;
    CorpusReader reader(files, static_cast<std::size_t>(opt.chunk_size));

    auto reader_main = [&] {
        try {
            std::int64_t produced = 0;
            for (;;) {
                {
                    std::unique_lock<std::mutex> lock(pl.mu);
                    wait_cv(pl.cv, lock, [&] { return pl.stop || pl.inflight < pl.max_inflight; }, "the encoders (reader)");
                    if (pl.stop) return;
                }
                auto batch = std::make_unique<LineBatch>();
                const bool more = reader.next(*batch);
                std::lock_guard<std::mutex> lock(pl.mu);
                if (!more) {
                    pl.reader_finished = true;
                    pl.total_batches = produced;
                    pl.cv.notify_all();
                    return;
                }
                ++produced;
                ++pl.inflight;
                pl.todo.push_back(std::move(batch));
                pl.cv.notify_all();
            }
        } catch (...) {
            pl.fail(std::current_exception());
        }
    };
    auto worker_main = [&] {
        try {
            BatchEncoder encoder(tok, opt);
            for (;;) {
                std::unique_ptr<LineBatch> batch;
                {
                    std::unique_lock<std::mutex> lock(pl.mu);
                    wait_cv(pl.cv, lock, [&] { return pl.stop || !pl.todo.empty() || pl.reader_finished; }, "the reader (encoder)");
                    if (pl.stop || pl.todo.empty()) return;
                    batch = std::move(pl.todo.front());
                    pl.todo.pop_front();
                }
                auto out = std::make_unique<EncodedBatch>();
                encoder.encode(*batch, *out);
                std::lock_guard<std::mutex> lock(pl.mu);
                pl.done.emplace(out->seq, std::move(out));
                pl.cv.notify_all();
            }
        } catch (...) {
            pl.fail(std::current_exception());
        }
    };

    if (log.started) log.started();
    Stopwatch clock;
    std::vector<std::thread> threads;
    threads.emplace_back(reader_main);
    for (int w = 0; w < opt.workers; ++w) threads.emplace_back(worker_main);

    constexpr std::int64_t kReportedSkips = 10;
    auto write_batch = [&](const EncodedBatch& b) {
        std::vector<std::size_t> id_off(writers.size(), 0), len_off(writers.size(), 0), line_off(writers.size(), 0);
        std::size_t bad_i = 0;
        for (std::size_t k = 0; k < b.status.size(); ++k) {
            ++result.lines;
            if (b.status[k] == LineStatus::Blank) {
                ++result.blank_lines;
            } else if (b.status[k] == LineStatus::Bad) {
                std::string msg = files[b.file] + ":" + std::to_string(b.first_line + static_cast<std::int64_t>(k)) +
                                  ": " + b.errors[bad_i++];
                if (!opt.skip_bad_lines) GPT_THROW(DataError, msg, " (use --skip-bad-lines to skip such lines)");
                if (result.bad_lines < kReportedSkips && log.progress) log.progress("skipping " + msg);
                ++result.bad_lines;
            } else {
                for (std::size_t w = 0; w < writers.size(); ++w) {
                    const EncodedBatch::Key& key = b.keys[w];
                    const std::uint32_t n = key.seqs_per_line[line_off[w]++];
                    for (std::uint32_t s = 0; s < n; ++s) {
                        const std::int32_t len = key.seq_lengths[len_off[w]++];
                        writers[w]->add_sequence(std::span<const std::int32_t>(key.ids.data() + id_off[w], static_cast<std::size_t>(len)));
                        id_off[w] += static_cast<std::size_t>(len);
                        result.tokens += len;
                    }
                    writers[w]->end_document();
                }
                ++result.documents;
            }
            if (opt.log_interval > 0 && result.lines % opt.log_interval == 0 && log.progress) {
                const double t = std::max(clock.seconds(), 1e-9);
                const double mb = static_cast<double>(result.bytes) / 1024.0 / 1024.0;
                log.progress("Processed " + std::to_string(result.lines) + " documents (" +
                             format_rate(static_cast<double>(result.lines) / t) + " docs/s, " + format_rate(mb / t) + " MB/s, " +
                             format_rate(static_cast<double>(result.tokens) / t) + " tokens/s).");
            }
        }
        result.bytes += b.bytes;
    };

    try {
        for (std::int64_t next = 0;; ++next) {
            std::unique_ptr<EncodedBatch> batch;
            {
                std::unique_lock<std::mutex> lock(pl.mu);
                wait_cv(pl.cv, lock, [&] {
                    return pl.error || pl.done.count(next) || (pl.reader_finished && next == pl.total_batches);
                }, "the encoders (writer)");
                if (pl.error) break;
                auto it = pl.done.find(next);
                if (it == pl.done.end()) break;  // every batch written
                batch = std::move(it->second);
                pl.done.erase(it);
            }
            write_batch(*batch);
            std::lock_guard<std::mutex> lock(pl.mu);
            --pl.inflight;
            pl.cv.notify_all();
        }
    } catch (...) {
        pl.fail(std::current_exception());
    }
    {
        std::lock_guard<std::mutex> lock(pl.mu);
        pl.stop = true;
        pl.cv.notify_all();
    }
    for (auto& t : threads) t.join();
    if (pl.error) std::rethrow_exception(pl.error);  // the writers' destructors drop their temporary files

    for (auto& w : writers) w->finalize();
    result.seconds = clock.seconds();
    return result;
}

}  // namespace gpt::data
