// Megatron's .idx/.bin pair from untrusted bytes. Input layout: u32 (little-endian) length L
// of the .idx, L bytes of .idx, the rest is the .bin. The constructor must reject every
// inconsistency with a DataError; once it accepts, every sequence and document index must
// be readable (the class promises later reads never go out of bounds), and the sequences
// must tile the .bin exactly.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"
#include "fuzz_util.hpp"

using gpt::data::IndexedDataset;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 4) return 0;
    std::uint32_t idx_len = 0;
    std::memcpy(&idx_len, data, 4);
    const std::string_view rest(reinterpret_cast<const char*>(data) + 4, size - 4);
    idx_len = static_cast<std::uint32_t>(std::min<std::size_t>(idx_len, rest.size()));
    const std::string prefix = gpt::fuzz::scratch_dir() + "/ds";
    gpt::fuzz::write_file(prefix + ".idx", rest.substr(0, idx_len));
    gpt::fuzz::write_file(prefix + ".bin", rest.substr(idx_len));
    try {
        IndexedDataset ds(prefix);
        std::int64_t tokens = 0;
        std::vector<std::int32_t> buf;
        for (std::int64_t s = 0; s < ds.num_sequences(); ++s) {
            const std::int32_t len = ds.sequence_length(s);
            if (len < 0) gpt::fuzz::fail("negative sequence length accepted");
            if (ds.sequence_offset(s) != tokens * static_cast<std::int64_t>(gpt::data::token_dtype_size(ds.dtype())))
                gpt::fuzz::fail("sequences do not tile the .bin");
            const std::vector<std::int32_t> seq = ds.sequence(s);
            if (static_cast<std::int64_t>(seq.size()) != len) gpt::fuzz::fail("sequence() length differs");
            if (len > 0) {
                buf.assign(static_cast<std::size_t>(len), 0);
                ds.read(s, len / 2, len - len / 2, buf.data());
                if (!std::equal(buf.begin(), buf.begin() + (len - len / 2), seq.begin() + len / 2))
                    gpt::fuzz::fail("read() of a sequence's second half differs from sequence()");
            }
            tokens += len;
        }
        if (tokens * static_cast<std::int64_t>(gpt::data::token_dtype_size(ds.dtype())) != ds.bin_size())
            gpt::fuzz::fail("accepted a .bin whose size the .idx does not describe");
        std::int64_t prev = 0;
        for (std::int64_t d = 0; d <= ds.num_documents(); ++d) {
            const std::int64_t v = ds.document_index(d);
            if (v < prev || v > ds.num_sequences()) gpt::fuzz::fail("accepted a bad document index");
            prev = v;
        }
    } catch (const gpt::DataError&) {
    } catch (const gpt::IoError&) {
    }
    return 0;
}
