// Gpt2Tokenizer::load on untrusted vocabulary and merges files. Input layout: the vocab file
// (JSON), a NUL byte, the merges file. A bad pair must be a DataError (or IoError); a pair
// it accepts must encode any text losslessly: decode(encode(x)) == x for a fixed sample.
#include <cstdint>
#include <string>

#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "fuzz_util.hpp"

using gpt::data::Gpt2Tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = in.find('\0');
    const std::string vocab = gpt::fuzz::scratch_dir() + "/vocab.json";
    const std::string merges = gpt::fuzz::scratch_dir() + "/merges.txt";
    gpt::fuzz::write_file(vocab, in.substr(0, nul));
    gpt::fuzz::write_file(merges, nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1));
    try {
        const Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab, merges);
        if (tok.eod() < 0 || tok.eod() >= tok.vocab_size()) gpt::fuzz::fail("<|endoftext|> id outside the vocabulary");
        const std::string sample = "aaaa abab ba\xc3\xa9 \xff\x00 12'll  \n";
        if (tok.decode(tok.encode(sample)) != sample) gpt::fuzz::fail("decode(encode(x)) != x");
    } catch (const gpt::DataError&) {
    } catch (const gpt::IoError&) {
    }
    return 0;
}
