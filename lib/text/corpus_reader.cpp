#include "text/corpus_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <glob.h>
#include <sys/stat.h>

#include "core/errors.hpp"
#include "data/mapped_file.hpp"

namespace gpt::data {

namespace {

constexpr std::size_t kReadSize = 4 << 20;

void check_readable(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) GPT_THROW(IoError, "cannot open input '", path, "': ", errno_message(errno));
    if (S_ISDIR(st.st_mode)) GPT_THROW(IoError, "input '", path, "' is a directory; give a file or a glob such as '", path, "/*.json'");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) GPT_THROW(IoError, "cannot open input '", path, "': ", errno_message(errno));
    std::fclose(f);
}

}  // namespace

std::vector<std::string> expand_input_paths(const std::vector<std::string>& inputs) {
    if (inputs.empty()) GPT_THROW(UsageError, "no --input given");
    std::vector<std::string> files;
    for (const std::string& in : inputs) {
        if (in.find_first_of("*?[") == std::string::npos) {
            check_readable(in);
            files.push_back(in);
            continue;
        }
        glob_t g{};
        int rc = ::glob(in.c_str(), 0, nullptr, &g);
        if (rc == GLOB_NOMATCH) {
            ::globfree(&g);
            GPT_THROW(IoError, "no input file matches '", in, "'");
        }
        if (rc != 0) {
            ::globfree(&g);
            GPT_THROW(IoError, "cannot expand input pattern '", in, "'");
        }
        std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
        ::globfree(&g);
        std::sort(matched.begin(), matched.end());
        for (auto& m : matched) {
            check_readable(m);
            files.push_back(m);
        }
    }
    return files;
}

CorpusReader::CorpusReader(std::vector<std::string> files, std::size_t chunk_size)
    : files_(std::move(files)), chunk_size_(std::max<std::size_t>(1, chunk_size)), buf_(kReadSize) {}

CorpusReader::~CorpusReader() {
    if (fp_) std::fclose(fp_);
}

bool CorpusReader::fill() {
    if (eof_) return false;
    // Keep the unconsumed tail (a partial line) and read after it; grow for very long lines.
    if (begin_ > 0) {
        std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    if (buf_.size() - end_ < kReadSize / 2) buf_.resize(buf_.size() * 2);
    std::size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, fp_);
    if (got == 0) {
        if (std::ferror(fp_)) GPT_THROW(IoError, "cannot read input '", files_[file_], "': ", errno_message(errno));
        eof_ = true;
        return false;
    }
    end_ += got;
    return true;
}

bool CorpusReader::next(LineBatch& batch) {
    batch.data.clear();
    batch.starts.clear();
    batch.ends.clear();
    batch.bytes = 0;
    for (;;) {
        if (!fp_) {
            if (file_ >= files_.size()) return false;
            fp_ = std::fopen(files_[file_].c_str(), "rb");
            if (!fp_) GPT_THROW(IoError, "cannot open input '", files_[file_], "': ", errno_message(errno));
            eof_ = false;
            line_no_ = 1;
            begin_ = end_ = 0;
        }
        batch.file = file_;
        batch.first_line = line_no_;
        while (batch.size() < chunk_size_) {
            const char* base = buf_.data();
            const void* nl = std::memchr(base + begin_, '\n', end_ - begin_);
            std::size_t line_end;
            std::size_t consumed;
            if (nl) {
                line_end = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
                consumed = line_end + 1 - begin_;
            } else if (fill()) {
                continue;
            } else if (end_ > begin_) {
                line_end = end_;  // last line without a final newline
                consumed = end_ - begin_;
            } else {
                break;
            }
            std::size_t len = line_end - begin_;
            if (len > 0 && base[begin_ + len - 1] == '\r') --len;  // CRLF files
            batch.starts.push_back(batch.data.size());
            batch.data.append(base + begin_, len);
            batch.ends.push_back(batch.data.size());
            batch.bytes += static_cast<std::int64_t>(consumed);
            begin_ += consumed;
            ++line_no_;
        }
        if (batch.size() > 0) {
            batch.seq = seq_++;
            return true;
        }
        std::fclose(fp_);
        fp_ = nullptr;
        ++file_;
    }
}

}  // namespace gpt::data
