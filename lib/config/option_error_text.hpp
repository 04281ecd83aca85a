// The text of a Boost.ProgramOptions error, for our one-line usage errors.
#pragma once

#include <boost/program_options/errors.hpp>
#include <string>

namespace gpt {

// What e.what() would say, without Boost 1.74's placeholder loop (see the .cpp).
std::string option_error_text(const boost::program_options::error& e);

}  // namespace gpt
