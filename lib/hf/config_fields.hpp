// The top-level fields of a Hugging Face config.json, read as typed values on demand: the
// GPT-2 and the Llama readers share it. Errors name the file and the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpt::hf {

class ConfigFields {
public:
    // Throws DataError (naming `path`) for text that is not one JSON object.
    ConfigFields(const std::string& text, const std::string& path);
    const std::vector<std::string>& architectures() const { return architectures_; }
    bool has(const char* key) const;  // present and not null
    const std::string& raw(const char* key) const { return raw_.at(key); }
    std::string string_of(const char* key, const std::string& def) const;
    // A positive integer up to 2^31; missing or null: `def`, or DataError when `required`.
    std::int64_t int_of(const char* key, std::int64_t def, bool required) const;
    bool bool_of(const char* key, bool def) const;
    double positive_of(const char* key, double def) const;  // a positive number

private:
    std::string path_;
    std::map<std::string, std::string> raw_;  // top-level key -> its JSON source text
    std::vector<std::string> architectures_;
};

}  // namespace gpt::hf
