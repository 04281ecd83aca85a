// GPT-2 BPE: ids equal tiktoken's on a varied corpus, hand-made edge cases and random Unicode;
// decode(encode(x)) == x; vocab/merges validation.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "text/json.hpp"
#include "text/pretokenize.hpp"
#include "text/utf8.hpp"
#include "data_test_util.hpp"
#include "test_env.hpp"

using namespace gpt::data;
using namespace gpt::data::test;

namespace {

const Gpt2Tokenizer& tokenizer() {
    static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab_file(), merge_file());
    return tok;
}

void expect_same_as_tiktoken(const std::vector<std::string>& texts, const std::string& scratch_name) {
    const auto expected = tiktoken_ids(texts, gpt::test::scratch_dir(scratch_name));
    Gpt2Encoder enc(tokenizer());
    int mismatches = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        std::vector<std::int32_t> ids;
        enc.encode(texts[i], ids);
        if (ids != expected[i] && ++mismatches <= 5)
            ADD_FAILURE() << "text " << i << " " << json_string(texts[i]) << ": ids differ from tiktoken";
        EXPECT_EQ(tokenizer().decode(ids), texts[i]) << "round trip of text " << i;
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace

TEST(Gpt2Tokenizer, LoadsGpt2Files) {
    EXPECT_EQ(tokenizer().vocab_size(), 50257);
    EXPECT_EQ(tokenizer().eod(), 50256);
    EXPECT_EQ(tokenizer().token_bytes(50256), "<|endoftext|>");
    EXPECT_EQ(tokenizer().token_bytes(220), " ");
}

TEST(Gpt2Tokenizer, KnownIds) {
    // Ids from the original GPT-2 encoder, independent of node.
    EXPECT_EQ(tokenizer().encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
    EXPECT_EQ(tokenizer().encode(" 's"), (std::vector<std::int32_t>{705, 82}));
    EXPECT_EQ(tokenizer().encode("<|endoftext|>"), (std::vector<std::int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
    EXPECT_TRUE(tokenizer().encode("").empty());
}

TEST(Gpt2Tokenizer, PreTokenizerPieces) {
    auto pieces = [](std::string_view s) {
        std::vector<std::string> out;
        for_each_piece(s, [&](std::size_t b, std::size_t e) { out.emplace_back(s.substr(b, e - b)); });
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
    EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
    EXPECT_EQ(pieces("x   "), (V{"x", "   "}));
    EXPECT_EQ(pieces("don't we'll"), (V{"don", "'t", " we", "'ll"}));
    EXPECT_EQ(pieces("IT'S"), (V{"IT", "'", "S"}));
    EXPECT_EQ(pieces("a123b !?"), (V{"a", "123", "b", " !?"}));
    EXPECT_EQ(pieces("e\xCC\x81t"), (V{"e", "\xCC\x81", "t"}));  // combining mark is not a letter
}

TEST(Gpt2Tokenizer, MatchesTiktokenOnEdgeCases) {
    expect_same_as_tiktoken(read_json_string_lines(gpt::test::source_dir() + "/tests/text/corpus/tokenizer_cases.jsonl"),
                            "tokenizer_cases");
}

TEST(Gpt2Tokenizer, MatchesTiktokenOnRandomUnicode) {
    expect_same_as_tiktoken(random_texts(3000, 12345), "tokenizer_random");
}

// Long space-free pieces, where the merge loop used to be quadratic (issue 20 section 7).
std::vector<std::string> long_pieces() {
    std::mt19937 rng(777);
    const std::string b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string blob, dna, word, digits;
    for (int i = 0; i < 5000; ++i) blob += b64[rng() % 64];
    for (int i = 0; i < 5000; ++i) dna += "ACGT"[rng() % 4];
    for (int i = 0; i < 5000; ++i) word += static_cast<char>('a' + rng() % 26);
    for (int i = 0; i < 3000; ++i) digits += static_cast<char>('0' + rng() % 10);
    return {blob, dna, word, std::string(5000, 'a'), std::string(3001, 'z') + "ing",
            "Pneumonoultramicroscopicsilicovolcanoconiosis" + word.substr(0, 500), digits,
            blob.substr(0, 65), blob.substr(0, 64), blob.substr(0, 63)};
}

TEST(Gpt2Tokenizer, MatchesTiktokenOnLongSpaceFreePieces) {
    expect_same_as_tiktoken(long_pieces(), "tokenizer_long_pieces");
}

TEST(Gpt2Tokenizer, HeapMergeEqualsTheRescanningMergeOnEveryPieceLength) {
    // Both BPE paths on the same pieces, across the length where bpe switches between them.
    std::mt19937 rng(99);
    const auto texts = random_texts(400, 4242);
    for (const std::string& base : texts) {
        for (std::size_t len : {std::size_t(1), std::size_t(7), std::size_t(33), Gpt2Tokenizer::kShortPiece}) {
            const std::string piece = base.substr(0, std::min(len, base.size()));
            std::vector<std::int32_t> a, b;
            tokenizer().bpe(piece, a);
            tokenizer().bpe_long(piece, b);
            ASSERT_EQ(a, b) << json_string(piece);
        }
    }
    for (int i = 0; i < 300; ++i) {
        std::string piece;
        const std::string alphabet = i % 2 ? "ab" : "etaoinshrdlu";
        for (std::size_t k = 0; k < Gpt2Tokenizer::kShortPiece; ++k) piece += alphabet[rng() % alphabet.size()];
        std::vector<std::int32_t> a, b;
        tokenizer().bpe(piece, a);
        tokenizer().bpe_long(piece, b);
        ASSERT_EQ(a, b) << piece;
    }
}

TEST(Gpt2Tokenizer, CacheGivesSameIdsAfterEviction) {
    // A tiny cache forces clearing mid-text; the ids must not change.
    const std::string text = "the cat sat on the mat, the cat sat again; " + std::string(200, 'z') + " the end";
    Gpt2Encoder small(tokenizer(), 3);
    std::vector<std::int32_t> a, b = tokenizer().encode(text);
    small.encode(text, a);
    EXPECT_EQ(a, b);
}

TEST(Gpt2Tokenizer, DecodeRejectsUnknownId) {
    std::vector<std::int32_t> bad{15496, 50257};
    EXPECT_THROW(tokenizer().decode(bad), gpt::DataError);
}

TEST(Gpt2Tokenizer, RejectsBadFiles) {
    const std::string dir = gpt::test::scratch_dir("tokenizer_files");
    EXPECT_THROW(Gpt2Tokenizer::load(dir + "/missing.json", merge_file()), gpt::IoError);
    // Swapped files.
    try {
        Gpt2Tokenizer::load(merge_file(), vocab_file());
        ADD_FAILURE() << "swapped files accepted";
    } catch (const gpt::DataError& e) {
        EXPECT_NE(std::string(e.what()).find("swap"), std::string::npos) << e.what();
    }
    // A vocabulary cut to its first 1000 tokens does not belong to the full merges file.
    {
        const std::string full = read_file(vocab_file());
        JsonCursor cur(full);
        std::string small = "{";
        bool first = true;
        cur.for_each_member([&](const std::string& key) {
            const std::int64_t id = cur.parse_int();
            if (id >= 1000 && id != 50256) return;
            small += (first ? "" : ", ") + json_string(key) + ": " + std::to_string(id == 50256 ? 1000 : id);
            first = false;
        });
        write_file(dir + "/small-vocab.json", small + "}");
    }
    try {
        Gpt2Tokenizer::load(dir + "/small-vocab.json", merge_file());
        ADD_FAILURE() << "a vocab without the merged tokens was accepted";
    } catch (const gpt::DataError& e) {
        EXPECT_NE(std::string(e.what()).find("do not belong together"), std::string::npos) << e.what();
    }
    write_file(dir + "/bad-merges.txt", "#version: 0.2\nĠ t\nnot-a-token-xyz zzzqqq\n");
    try {
        Gpt2Tokenizer::load(vocab_file(), dir + "/bad-merges.txt");
        ADD_FAILURE() << "mismatched merges accepted";
    } catch (const gpt::DataError& e) {
        EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
    }
}
