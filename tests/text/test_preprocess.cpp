// preprocess_data / merge_datasets: output equals an independent rendering of Megatron's
// format from tiktoken's ids; worker count and merging do not change bytes; bad input fails
// with file:line messages and the documented exit codes, leaving no .idx behind.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "text/gpt2_tokenizer.hpp"
#include "data/indexed_dataset.hpp"
#include "text/json.hpp"
#include "text/merge.hpp"
#include "text/preprocess.hpp"
#include "data_test_util.hpp"
#include "test_env.hpp"

using namespace gpt::data;
using namespace gpt::data::test;
namespace fs = std::filesystem;

namespace {

const Gpt2Tokenizer& tokenizer() {
    static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab_file(), merge_file());
    return tok;
}

// Lines covering Megatron's document rules: lists, empty texts, empty lists, other keys,
// duplicate keys, escapes, and a blank line; then many ordinary documents.
std::vector<std::string> corpus_lines() {
    std::vector<std::string> lines = {
        R"({"text": "Hello world.", "id": 1})",
        R"({"text": ""})",
        R"({"text": ["first sentence.", "", "second one"]})",
        R"({"text": []})",
        R"({"text": "multilingual 中文 😀 ümlaut"})",
        R"({"id": 5, "meta": {"a": [1, 2.5e3, null, true, false, -0.5]}, "text": "nested other keys"})",
        R"({"text": "dup", "text": "last wins"})",
        R"({"text": "escapes \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 <|endoftext|>"})",
        "   ",
        R"({"text": ["", ""]})",
    };
    const auto cases = read_json_string_lines(gpt::test::source_dir() + "/tests/text/corpus/tokenizer_cases.jsonl");
    for (int i = 0; i < 400; ++i)
        lines.push_back("{\"text\": " + json_string("Document " + std::to_string(i) + ": " + cases[i % cases.size()]) + "}");
    return lines;
}

std::string join_lines(const std::vector<std::string>& lines, std::size_t b, std::size_t e) {
    std::string s;
    for (std::size_t i = b; i < e; ++i) s += lines[i] + "\n";
    return s;
}

// Megatron's writer, written out independently from the format description: documents are
// lists of sequences (already without empty ones).
void render_expected(const std::vector<std::vector<std::vector<std::int32_t>>>& docs, std::string& idx, std::string& bin) {
    std::vector<std::int32_t> lengths;
    std::vector<std::int64_t> doc_idx{0};
    bin.clear();
    for (const auto& d : docs) {
        for (const auto& s : d) {
            lengths.push_back(static_cast<std::int32_t>(s.size()));
            for (std::int32_t id : s) {
                const std::uint16_t v = static_cast<std::uint16_t>(id);
                bin.append(reinterpret_cast<const char*>(&v), 2);
            }
        }
        doc_idx.push_back(static_cast<std::int64_t>(lengths.size()));
    }
    auto put = [&](const auto& v) { idx.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    idx.assign("MMIDIDX\0\0", 9);
    put(std::uint64_t{1});
    put(std::uint8_t{8});
    put(static_cast<std::uint64_t>(lengths.size()));
    put(static_cast<std::uint64_t>(doc_idx.size()));
    for (auto l : lengths) put(l);
    std::int64_t off = 0;
    for (auto l : lengths) {
        put(off);
        off += 2 * l;
    }
    for (auto d : doc_idx) put(d);
}

PreprocessResult run_lib(const std::string& input, const std::string& prefix, int workers, int chunk, bool skip = false) {
    PreprocessOptions o;
    o.inputs = {input};
    o.output_prefix = prefix;
    o.append_eod = true;
    o.workers = workers;
    o.chunk_size = chunk;
    o.log_interval = 0;
    o.skip_bad_lines = skip;
    return preprocess_corpus(o, tokenizer(), PreprocessLog{});
}

std::string app_command(const std::string& args) {
    return "'" + app_binary("preprocess_data") + "' --vocab-file '" + vocab_file() + "' --merge-file '" + merge_file() +
           "' --log-interval 0 " + args;
}

bool has_idx(const std::string& dir) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().extension() == ".idx") return true;
    return false;
}

}  // namespace

TEST(Preprocess, MatchesMegatronFormatFromTiktokenIds) {
    const std::string dir = gpt::test::scratch_dir("pre_format");
    const auto lines = corpus_lines();
    write_file(dir + "/corpus.json", join_lines(lines, 0, lines.size()));
    const PreprocessResult r = run_lib(dir + "/corpus.json", dir + "/out", 2, 5);
    EXPECT_EQ(r.blank_lines, 1);
    EXPECT_EQ(r.documents, static_cast<std::int64_t>(lines.size()) - 1);

    // The reference: each document's texts through tiktoken, Megatron's rules applied.
    std::vector<std::vector<std::string>> doc_texts;
    std::vector<std::string> flat;
    for (const auto& line : lines) {
        std::vector<TextField> f;
        if (line.find('{') == std::string::npos) continue;
        parse_corpus_line(line, {"text"}, f);
        doc_texts.emplace_back(f[0].parts.begin(), f[0].parts.begin() + static_cast<std::ptrdiff_t>(f[0].count));
        flat.insert(flat.end(), doc_texts.back().begin(), doc_texts.back().end());
    }
    const auto ids = tiktoken_ids(flat, dir);
    std::vector<std::vector<std::vector<std::int32_t>>> docs;
    std::size_t k = 0;
    for (const auto& texts : doc_texts) {
        std::vector<std::vector<std::int32_t>> d;
        for (std::size_t t = 0; t < texts.size(); ++t, ++k)
            if (!ids[k].empty()) d.push_back(ids[k]);
        if (!d.empty()) d.back().push_back(50256);
        docs.push_back(d);
    }
    std::string idx, bin;
    render_expected(docs, idx, bin);
    EXPECT_TRUE(read_file(dir + "/out_text_document.idx") == idx) << ".idx differs from the reference";
    EXPECT_TRUE(read_file(dir + "/out_text_document.bin") == bin) << ".bin differs from the reference";
}

TEST(Preprocess, WorkerCountAndChunkSizeDoNotChangeOutput) {
    const std::string dir = gpt::test::scratch_dir("pre_workers");
    const auto lines = corpus_lines();
    write_file(dir + "/corpus.json", join_lines(lines, 0, lines.size()));
    run_lib(dir + "/corpus.json", dir + "/w1", 1, 64);
    const std::string idx = read_file(dir + "/w1_text_document.idx"), bin = read_file(dir + "/w1_text_document.bin");
    for (auto [workers, chunk] : {std::pair{2, 1}, std::pair{3, 7}, std::pair{4, 1000}}) {
        const std::string p = dir + "/w" + std::to_string(workers);
        run_lib(dir + "/corpus.json", p, workers, chunk);
        EXPECT_TRUE(read_file(p + "_text_document.idx") == idx) << workers << " workers";
        EXPECT_TRUE(read_file(p + "_text_document.bin") == bin) << workers << " workers";
    }
}

TEST(Preprocess, MergeAndGlobEqualWhole) {
    const std::string dir = gpt::test::scratch_dir("pre_merge");
    const auto lines = corpus_lines();
    write_file(dir + "/whole.json", join_lines(lines, 0, lines.size()));
    fs::create_directories(dir + "/parts");
    fs::create_directories(dir + "/parts_out");
    const std::size_t cut[] = {0, 3, 150, lines.size()};
    for (int p = 0; p < 3; ++p) {
        const std::string part = dir + "/parts/part" + std::to_string(p) + ".json";
        write_file(part, join_lines(lines, cut[p], cut[p + 1]));
        run_lib(part, dir + "/parts_out/p" + std::to_string(p), 2, 16);
    }
    run_lib(dir + "/whole.json", dir + "/whole", 1, 64);
    const std::string idx = read_file(dir + "/whole_text_document.idx"), bin = read_file(dir + "/whole_text_document.bin");

    merge_datasets(dataset_prefixes_in_folder(dir + "/parts_out"), dir + "/merged");
    EXPECT_TRUE(read_file(dir + "/merged.idx") == idx);
    EXPECT_TRUE(read_file(dir + "/merged.bin") == bin);

    std::string out;
    ASSERT_EQ(run_command("'" + app_binary("merge_datasets") + "' --input '" + dir + "/parts_out' --output-prefix '" + dir +
                              "/merged_app'", out), 0) << out;
    EXPECT_TRUE(read_file(dir + "/merged_app.idx") == idx);
    EXPECT_TRUE(read_file(dir + "/merged_app.bin") == bin);

    ASSERT_EQ(run_command(app_command("--input '" + dir + "/parts/*.json' --output-prefix '" + dir +
                                      "/globbed' --append-eod --workers 2 --dataset-impl mmap"), out), 0) << out;
    EXPECT_NE(out.find("> padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"), std::string::npos) << out;
    EXPECT_TRUE(read_file(dir + "/globbed_text_document.idx") == idx);
    EXPECT_TRUE(read_file(dir + "/globbed_text_document.bin") == bin);
}

TEST(Preprocess, SeveralJsonKeysWriteOneDatasetEach) {
    const std::string dir = gpt::test::scratch_dir("pre_keys");
    write_file(dir + "/c.json", "{\"title\": \"T one\", \"text\": \"body one\"}\n{\"text\": \"body two\", \"title\": \"\"}\n");
    std::string out;
    ASSERT_EQ(run_command(app_command("--input '" + dir + "/c.json' --output-prefix '" + dir + "/k' --json-keys text title"), out), 0) << out;
    IndexedDataset text(dir + "/k_text_document"), title(dir + "/k_title_document");
    EXPECT_EQ(text.num_documents(), 2);
    EXPECT_EQ(title.num_documents(), 2);
    EXPECT_EQ(title.num_sequences(), 1);  // the empty title adds no sequence (no --append-eod here)
    EXPECT_EQ(tokenizer().decode(title.sequence(0)), "T one");
}

TEST(Preprocess, BadInputFailsWithFileLineAndExitCode) {
    const std::string dir = gpt::test::scratch_dir("pre_bad");
    const std::string good = "{\"text\": \"fine\"}\n";
    struct Case {
        std::string name, contents, needle;
    };
    const std::vector<Case> cases = {
        {"json", good + "{\"text\": \"unterminated}\n", "bad.json:2:"},
        {"key", good + good + "{\"body\": \"no text key\"}\n", "bad.json:3: no key 'text'"},
        {"type", "{\"text\": 42}\n", "bad.json:1: bad JSON line"},
        {"utf8", good + "{\"text\": \"bad \xC3\x28 byte\"}\n", "bad.json:2: invalid UTF-8"},
        {"surrogate", "{\"text\": \"lone \\ud800\"}\n", "surrogate"},
        {"notobject", "[\"text\"]\n", "expected a JSON object"},
        {"extra", "{\"text\": \"a\"} trailing\n", "extra data"},
    };
    for (const auto& c : cases) {
        const std::string sub = dir + "/" + c.name;
        fs::create_directories(sub);
        write_file(sub + "/bad.json", c.contents);
        std::string out;
        EXPECT_EQ(run_command(app_command("--input '" + sub + "/bad.json' --output-prefix '" + sub + "/o' --workers 2"), out), 1)
            << c.name << ": " << out;
        EXPECT_NE(out.find(c.needle), std::string::npos) << c.name << ": " << out;
        EXPECT_FALSE(has_idx(sub)) << c.name << ": an .idx was left behind";
        EXPECT_EQ(std::distance(fs::directory_iterator(sub), fs::directory_iterator()), 1) << c.name << ": temporary files left";
    }
    std::string out;
    EXPECT_EQ(run_command(app_command("--input '" + dir + "/missing.json' --output-prefix '" + dir + "/o'"), out), 1) << out;
    EXPECT_NE(out.find("missing.json"), std::string::npos) << out;
    EXPECT_EQ(run_command(app_command("--input '" + dir + "/json/bad.json' --output-prefix '" + dir + "/no/such/dir/o'"), out), 1) << out;
    EXPECT_NE(out.find("cannot create"), std::string::npos) << out;
    EXPECT_EQ(run_command(app_command("--input x.json --output-prefix o --workers 0"), out), 2) << out;
    EXPECT_EQ(run_command(app_command("--input x.json --output-prefix o --no-such-flag"), out), 2) << out;
    EXPECT_EQ(run_command(app_command("--input x.json --output-prefix o --tokenizer-type BertWordPieceLowerCase"), out), 2) << out;
    EXPECT_EQ(run_command("'" + app_binary("preprocess_data") + "' --vocab-file '" + merge_file() + "' --merge-file '" +
                          vocab_file() + "' --input '" + dir + "/json/bad.json' --output-prefix '" + dir + "/o'", out), 1) << out;
    EXPECT_NE(out.find("swap"), std::string::npos) << out;
    EXPECT_EQ(run_command(app_command("--input '" + dir + "/nothing*.json' --output-prefix '" + dir + "/o'"), out), 1) << out;
    EXPECT_NE(out.find("no input file matches"), std::string::npos) << out;
}

TEST(Preprocess, MergeRejectsIncompleteOrDamagedInputs) {
    const std::string dir = gpt::test::scratch_dir("merge_bad");
    fs::create_directories(dir + "/parts");
    write_file(dir + "/c.json", "{\"text\": \"one\"}\n");
    run_lib(dir + "/c.json", dir + "/parts/a", 1, 1);
    write_file(dir + "/parts/orphan.bin", "xx");
    const std::string merge = "'" + app_binary("merge_datasets") + "' --output-prefix '" + dir + "/m' --input ";
    std::string out;
    EXPECT_EQ(run_command(merge + "'" + dir + "/parts'", out), 1) << out;
    EXPECT_NE(out.find("orphan.bin' has no matching .idx"), std::string::npos) << out;
    fs::remove(dir + "/parts/orphan.bin");
    write_file(dir + "/parts/a_text_document.bin", "truncated");
    EXPECT_EQ(run_command(merge + "'" + dir + "/parts'", out), 1) << out;
    EXPECT_NE(out.find("a_text_document.bin"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir + "/m.idx"));
    EXPECT_EQ(run_command(merge + "'" + dir + "/missing_prefix'", out), 1) << out;
    EXPECT_EQ(run_command("'" + app_binary("merge_datasets") + "' --input x", out), 2) << out;
}

TEST(Preprocess, SkipBadLinesCountsAndSkips) {
    const std::string dir = gpt::test::scratch_dir("pre_skip");
    write_file(dir + "/c.json", "{\"text\": \"one\"}\nnot json\n{\"text\": \"two\"}\n{\"x\": 1}\n{\"text\": \"bad \xFF\"}\n");
    std::string out;
    ASSERT_EQ(run_command(app_command("--input '" + dir + "/c.json' --output-prefix '" + dir + "/o' --skip-bad-lines --append-eod"), out), 0) << out;
    EXPECT_NE(out.find("Skipped 3 bad lines"), std::string::npos) << out;
    EXPECT_NE(out.find("c.json:2:"), std::string::npos) << out;
    IndexedDataset d(dir + "/o_text_document");
    ASSERT_EQ(d.num_documents(), 2);
    EXPECT_EQ(tokenizer().decode(d.sequence(1)), "two<|endoftext|>");
}

TEST(Preprocess, WriteErrorLeavesNoIndex) {
    // A file-size limit makes writes fail with EFBIG, as a full disk fails them with ENOSPC.
    const std::string dir = gpt::test::scratch_dir("pre_full");
    std::string big;
    for (int i = 0; i < 3000; ++i) big += "{\"text\": \"" + std::string(200, 'a' + i % 26) + " word " + std::to_string(i) + "\"}\n";
    write_file(dir + "/c.json", big);
    std::string out;
    const int rc = run_command("trap '' XFSZ; ulimit -f 8; " +
                               app_command("--input '" + dir + "/c.json' --output-prefix '" + dir + "/o'"), out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("cannot write"), std::string::npos) << out;
    EXPECT_FALSE(has_idx(dir));
    EXPECT_FALSE(fs::exists(dir + "/o_text_document.bin"));
}

namespace {
std::vector<std::string> temp_files_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    return out;
}
}  // namespace

TEST(Preprocess, FailedRewriteKeepsThePreviousDataset) {
    // Issue 20 section 6: the disk fills while the new .idx is written. Many one-token
    // documents make the .idx (20 bytes a document) ten times the .bin (2 bytes), so an
    // 8 KiB file-size limit (16 blocks of 512 bytes in popen's sh) lets the new .bin (6000
    // bytes) complete and fails the new .idx (60 KB) (EFBIG, as a
    // full disk fails it with ENOSPC). The previous pair under the prefix must survive whole.
    const std::string dir = gpt::test::scratch_dir("pre_keep_old");
    write_file(dir + "/old.json", "{\"text\": \"the old dataset\"}\n");
    std::string out;
    ASSERT_EQ(run_command(app_command("--input '" + dir + "/old.json' --output-prefix '" + dir + "/o'"), out), 0) << out;
    const std::string bin = dir + "/o_text_document.bin", idx = dir + "/o_text_document.idx";
    const std::string old_bin = read_file(bin), old_idx = read_file(idx);
    std::string many;
    for (int i = 0; i < 3000; ++i) many += "{\"text\": \"a\"}\n";
    write_file(dir + "/new.json", many);
    const int rc = run_command("trap '' XFSZ; ulimit -f 16; " +
                               app_command("--input '" + dir + "/new.json' --output-prefix '" + dir + "/o'"), out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find(".idx.tmp."), std::string::npos) << "the failure should be the new index's: " << out;
    EXPECT_EQ(read_file(bin), old_bin);
    EXPECT_EQ(read_file(idx), old_idx);
    IndexedDataset d(dir + "/o_text_document");
    EXPECT_EQ(tokenizer().decode(d.sequence(0)), "the old dataset");
    EXPECT_TRUE(temp_files_in(dir).empty());
}

TEST(Preprocess, SigtermRemovesTemporaryFilesAndTheNextRunRemovesStaleOnes) {
    const std::string dir = gpt::test::scratch_dir("pre_sigterm");
    // The input is a FIFO held open, so the tool is mid-run (its temporary files exist)
    // when it gets SIGTERM, as under Slurm's time limit. The tool opens its input twice (a
    // readability probe, then the read), so the line written between the two may meet no
    // reader: SIGPIPE is ignored and the write may fail; the tool then waits for input that
    // never comes, which is mid-run all the same. Every wait is bounded (20 s).
    const std::string script =
        "trap '' PIPE; cd '" + dir + "' && mkfifo in.json && (" + app_command("--input in.json --output-prefix o") +
        " > tool.log 2>&1 & echo $! > pid) && exec 3> in.json && { echo '{\"text\": \"a\"}' >&3 || true; } && "
        "i=0; until ls o_text_document.bin.tmp.* > /dev/null 2>&1; do i=$((i+1)); [ $i -lt 400 ] || exit 3; sleep 0.05; done && "
        "kill -TERM $(cat pid) && i=0; while kill -0 $(cat pid) 2> /dev/null; do i=$((i+1)); [ $i -lt 400 ] || exit 4; sleep 0.05; done; exec 3>&-";
    std::string out;
    ASSERT_EQ(run_command(script, out), 0) << out;
    EXPECT_TRUE(temp_files_in(dir).empty()) << temp_files_in(dir).front();

    // A writer killed outright (SIGKILL, node crash) leaves its files; the next run removes
    // them when their pid is gone (99999999 is above Linux's pid_max).
    write_file(dir + "/o_text_document.bin.tmp.99999999", "stale");
    write_file(dir + "/o_text_document.idx.tmp.99999999", "stale");
    write_file(dir + "/c.json", "{\"text\": \"fresh\"}\n");
    ASSERT_EQ(run_command(app_command("--input '" + dir + "/c.json' --output-prefix '" + dir + "/o'"), out), 0) << out;
    EXPECT_TRUE(temp_files_in(dir).empty()) << temp_files_in(dir).front();
}
