// The loose-JSON corpus path of preprocess_data: the bytes as a corpus file, split into lines
// by CorpusReader, each line UTF-8-checked and parsed by parse_corpus_line as the workers do.
// Oracles: lines never lose or gain bytes; a line accepted as UTF-8 yields fields that are
// UTF-8 too (\u escapes decode to scalar values only), since the tokenizer relies on it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "text/corpus_reader.hpp"
#include "text/json.hpp"
#include "text/utf8.hpp"
#include "fuzz_util.hpp"

using namespace gpt::data;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const std::string path = gpt::fuzz::scratch_dir() + "/corpus.jsonl";
    gpt::fuzz::write_file(path, bytes);

    const std::vector<std::string> keys{"text", "title"};
    std::vector<TextField> fields;
    CorpusReader reader({path}, 3);
    LineBatch batch;
    std::size_t consumed = 0;
    std::int64_t next_line = 1;
    while (reader.next(batch)) {
        if (batch.first_line != next_line) gpt::fuzz::fail("batch starts at the wrong line");
        next_line += static_cast<std::int64_t>(batch.size());
        consumed += static_cast<std::size_t>(batch.bytes);
        for (std::size_t k = 0; k < batch.size(); ++k) {
            const std::string_view line = batch.line(k);
            if (line.find('\n') != std::string_view::npos) gpt::fuzz::fail("a line holds a newline");
            if (utf8::find_invalid(line) != std::string_view::npos) continue;  // the worker rejects it here
            try {
                parse_corpus_line(line, keys, fields);
            } catch (const gpt::DataError&) {
                continue;
            }
            for (const TextField& f : fields) {
                if (!f.present) continue;
                if (!f.is_list && f.count != 1) gpt::fuzz::fail("a string field with " + std::to_string(f.count) + " parts");
                for (std::size_t p = 0; p < f.count; ++p)
                    if (utf8::find_invalid(f.parts[p]) != std::string_view::npos)
                        gpt::fuzz::fail("a valid UTF-8 line parsed into invalid UTF-8");
            }
        }
    }
    if (consumed != size) gpt::fuzz::fail("the reader consumed " + std::to_string(consumed) + " of " + std::to_string(size) + " bytes");
    return 0;
}
