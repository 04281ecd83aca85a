#include "hf/config_fields.hpp"

#include <charconv>

#include "core/errors.hpp"
#include "text/json.hpp"

namespace gpt::hf {

ConfigFields::ConfigFields(const std::string& text, const std::string& path) : path_(path) {
    try {
        data::JsonCursor j(text);
        if (j.peek() != '{') j.fail("not a JSON object");
        j.for_each_member([&](const std::string& key) {
            if (key == "architectures" && j.peek() == '[') {
                j.expect('[');
                if (!j.consume(']')) {
                    do {
                        if (j.peek() != '"') j.fail("architectures holds a non-string");
                        j.parse_string(architectures_.emplace_back());
                    } while (j.consume(','));
                    j.expect(']');
                }
                return;
            }
            raw_[key] = std::string(j.take_value());
        });
        GPT_REQUIRE(j.at_end(), DataError, "trailing text after the JSON object");
    } catch (const DataError& e) {
        throw DataError(path + ": " + e.what());
    }
}

bool ConfigFields::has(const char* key) const {
    const auto it = raw_.find(key);
    return it != raw_.end() && it->second != "null";
}

std::string ConfigFields::string_of(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    std::string s;
    data::JsonCursor j(raw_.at(key));
    GPT_REQUIRE(j.peek() == '"', DataError, path_, ": ", key, " is not a string");
    j.parse_string(s);
    return s;
}

std::int64_t ConfigFields::int_of(const char* key, std::int64_t def, bool required) const {
    if (!has(key)) {
        GPT_REQUIRE(!required, DataError, path_, ": ", key, " is missing");
        return def;
    }
    const std::string& t = raw_.at(key);
    try {
        data::JsonCursor j(t);
        const std::int64_t v = j.parse_int();
        GPT_REQUIRE(j.at_end() && v > 0 && v <= (1LL << 31), DataError, "");
        return v;
    } catch (const DataError&) {
        GPT_THROW(DataError, path_, ": ", key, " is ", t, ", not a positive integer");
    }
}

bool ConfigFields::bool_of(const char* key, bool def) const {
    if (!has(key)) return def;
    const std::string& t = raw_.at(key);
    GPT_REQUIRE(t == "true" || t == "false", DataError, path_, ": ", key, " is ", t, ", not true or false");
    return t == "true";
}

double ConfigFields::positive_of(const char* key, double def) const {
    if (!has(key)) return def;
    const std::string& t = raw_.at(key);
    double v = 0.0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    GPT_REQUIRE(r.ec == std::errc() && r.ptr == t.data() + t.size() && v > 0.0, DataError, path_, ": ", key,
                " is ", t, ", not a positive number");
    return v;
}

}  // namespace gpt::hf
