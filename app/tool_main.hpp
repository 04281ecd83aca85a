// The error-to-exit-code policy shared by the single-process tools (preprocess_data,
// merge_datasets): usage errors exit 2, other errors 1, each as one line on stderr.
#pragma once

#include <boost/program_options/errors.hpp>
#include <cstdio>
#include <exception>

#include "core/errors.hpp"

namespace gpt::app {

template <typename Run>
int run_tool(const char* name, Run run) {
    try {
        return run();
    } catch (const boost::program_options::error& e) {
        std::fprintf(stderr, "%s: error: %s (see --help)\n", name, e.what());
        return 2;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: error: %s\n", name, e.what());
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "%s: error: %s\n", name, e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", name, e.what());
        return 1;
    }
}

}  // namespace gpt::app
