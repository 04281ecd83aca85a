// What a checkpoint remembers of the run that saved it, and the one codec between that and
// a Config. The arguments table (format_arguments) is log text: doubles rounded to 6 digits,
// an empty string and "None" alike, lists split on ", ". So a checkpoint stores every flag
// as typed data (the `run_config` attribute) beside the table (kept for people and h5dump),
// and every reader - the trainer's load and argument check, gpt_generate, the converter -
// goes through SavedRun. Checkpoints older than run_config have only the table: the legacy
// reader (saved_run_table.cpp) is the one place that still parses it.
//
// run_config, version 1: ASCII lines; the first is "version 1", then one "key type value"
// line per flag, key the arguments table's name:
//   bool   true | false              int, uint   decimal (64-bit signed, unsigned)
//   double the shortest text that reads back as the same bits (inf, nan as such)
//   str    "..." with \" \\ and \xHH for every byte outside printable ASCII
//   ints   [1, 2]                    strs        ["a", "b c"]
// plus `padded_vocab_size int N` (the saving run's padded vocabulary; 0: not known). A new
// flag is a new key in the same version (an older build ignores keys it does not have); a
// key whose meaning or type changes needs a new version, which older builds refuse.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/option_value.hpp"

namespace gpt {

inline constexpr const char* kSavedRunAttribute = "run_config";      // the typed data
inline constexpr const char* kArgumentsTableAttribute = "config";    // format_arguments' text
inline constexpr int kSavedRunVersion = 1;

struct SavedRun {
    Config config;                       // the stored values over the defaults
    std::set<std::string> keys;          // the keys stored (an older table lacks newer flags)
    std::int64_t padded_vocab_size = 0;  // 0: not known (the vocabulary came from the tokenizer)
    int version = 0;                     // kSavedRunVersion, or 0: read from a legacy table
    std::string file;                    // for messages

    bool has(std::string_view key) const { return keys.count(std::string(key)) > 0; }
    // Whether a stored value and another run's agree. A legacy table printed doubles with 6
    // significant digits, so those agree when they print alike.
    bool same(const OptionValue& stored, const OptionValue& other) const;
};

// The run_config text of `cfg`.
std::string encode_saved_run(const Config& cfg);

// Reads run_config text. Throws DataError naming `file`, the attribute and the key for a
// malformed line, a duplicate key, a type other than this build's for the flag, or a value
// the flag refuses; an unknown version is a DataError naming both versions.
SavedRun decode_saved_run(const std::string& text, const std::string& file);

// The legacy reader: an arguments table (format_arguments) as older builds saved it. Rows
// this build has no flag for are skipped, except Megatron's spellings of ours
// (use_rotary_position_embeddings, add_bias_linear) and architecture rows our model cannot
// express (squared_relu, qk_layernorm, ... set; a kv_channels other than hidden/heads): a
// UsageError naming the file and the row. A malformed value is a DataError naming the row.
SavedRun saved_run_from_table(const std::string& table, const std::string& file);

// The OptionField of `key`, or nullptr when this build has no such flag.
const OptionField* find_option_field(std::string_view key);

}  // namespace gpt
