// The lines of a tokenizer file held in memory (merges, tiktoken ranks): each without its
// '\n' and a trailing '\r' (a file saved on Windows), numbered from 1 for error messages.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpt::data {

class TextLines {
public:
    explicit TextLines(std::string_view text) : text_(text) {}

    // The next line; false after the last one.
    bool next(std::string_view& line) {
        if (pos_ >= text_.size()) return false;
        std::size_t eol = text_.find('\n', pos_);
        if (eol == std::string_view::npos) eol = text_.size();
        line = text_.substr(pos_, eol - pos_);
        pos_ = eol + 1;
        ++line_no_;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        return true;
    }
    std::size_t line_no() const { return line_no_; }  // of the line next() gave last
    bool at_end() const { return pos_ >= text_.size(); }  // that line was the last

private:
    std::string_view text_;
    std::size_t pos_ = 0, line_no_ = 0;
};

}  // namespace gpt::data
