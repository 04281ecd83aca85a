// The corpus-line JSON reader accepts what Python's json.loads accepts (Megatron reads lines
// with it) and rejects the rest with a column.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "text/json.hpp"

using namespace gpt::data;

namespace {

std::vector<std::string> texts(const std::string& line, const std::vector<std::string>& keys = {"text"}) {
    std::vector<TextField> f;
    parse_corpus_line(line, keys, f);
    if (!f[0].present) return {"<missing>"};
    return {f[0].parts.begin(), f[0].parts.begin() + static_cast<std::ptrdiff_t>(f[0].count)};
}

using V = std::vector<std::string>;

}  // namespace

TEST(Json, AcceptsWhatPythonAccepts) {
    EXPECT_EQ(texts(R"({"text": "a"})"), V{"a"});
    EXPECT_EQ(texts(" \t{ \"text\" : \"a\" } \r"), V{"a"});
    EXPECT_EQ(texts(R"({"n": NaN, "i": Infinity, "j": -Infinity, "x": -0.5e+3, "z": 0, "text": "b"})"), V{"b"});
    EXPECT_EQ(texts(R"({"o": {"p": [1, [2, {"q": null}], true, false]}, "text": ["x", "y"]})"), (V{"x", "y"}));
    EXPECT_EQ(texts(R"({"text": "first", "text": "last"})"), V{"last"});
    EXPECT_EQ(texts(R"({"text": []})"), V{});
    EXPECT_EQ(texts(R"({"other": 1})"), V{"<missing>"});
    EXPECT_EQ(texts(R"({"text": "\u00e9\ud83d\ude00\n\t\"\\\/"})"), V{"\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\/"});
    EXPECT_EQ(texts(R"({"text": "\u0000"})"), V{std::string(1, '\0')});
}

TEST(Json, RejectsWhatPythonRejects) {
    const std::vector<std::string> bad = {
        R"({"text": "a",})",        R"({'text': 'a'})",          R"({text: "a"})",
        R"({"text": "a", "n": 01})", R"({"text": "a", "n": .5})", R"({"text": "a", "n": 1.})",
        "{\"text\": \"tab\there\"}", R"({"text": tru})",          R"({"text": "a"} {"b": 1})",
        R"({"text": "a")",          R"({"text": "\x"})",         R"({"text": "\u12"})",
        R"({"text": "\udc00"})",    R"({"text": "\ud800x"})",     R"(["text"])",
        R"({"text": 5})",           R"({"text": ["a", 1]})",      R"({"text": null})",
        "",
    };
    for (const auto& line : bad) {
        std::vector<TextField> f;
        try {
            parse_corpus_line(line, {"text"}, f);
            ADD_FAILURE() << "accepted: " << line;
        } catch (const gpt::DataError& e) {
            EXPECT_NE(std::string(e.what()).find("column"), std::string::npos) << e.what();
        }
    }
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
    std::string deep = "{\"text\": \"a\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    std::vector<TextField> f;
    EXPECT_THROW(parse_corpus_line(deep, {"text"}, f), gpt::DataError);
}
