// Shared by the fuzz targets of this folder: a scratch folder for readers that take a path,
// and the oracle failure that libFuzzer and the replay test both record.
//
// Every target feeds untrusted bytes to a public reader. A reader may reject them only with
// the typed errors it documents (DataError, IoError, UsageError); anything else escaping a
// target (InternalError from a GPT_ASSERT, std::out_of_range, std::bad_alloc, ...) aborts the
// run, as does every sanitizer report and every gpt::fuzz::fail().
#pragma once

#include <string>
#include <string_view>

namespace gpt::fuzz {

// A private folder, created on first use and removed at exit.
const std::string& scratch_dir();
// Writes bytes to path (truncating); aborts when it cannot (the harness, not the input, failed).
void write_file(const std::string& path, std::string_view bytes);
// An oracle found a wrong result: print why and abort.
[[noreturn]] void fail(const std::string& why);

}  // namespace gpt::fuzz
