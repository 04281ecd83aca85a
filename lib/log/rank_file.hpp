// The rank's --log-dir file, for the last words of a failing rank (lib/dist/fatal.hpp).
#pragma once

#include <string>

namespace gpt::log {

// The rank's --log-dir file ("" when there is none), as set by log::init.
std::string rank_file();
// Appends `text` to the rank's --log-dir file in one write(2) and fsyncs it, bypassing the
// logging core: it must be on disk before the process is killed. Does nothing without
// --log-dir; never throws.
void append_to_rank_file(const std::string& text);

}  // namespace gpt::log
