// The planner's output: a ranked table for people, the same rows as JSON for tools, and the
// one-paragraph summary auto mode logs (choice, runner-up and why).
#pragma once

#include <ostream>
#include <string>

#include "plan/search.hpp"

namespace gpt::plan {

struct ReportLimits {
    int max_rows = 15;      // feasible layouts shown (table and JSON alike)
    int max_rejected = 12;  // rejected layouts shown
};

void write_plan_table(const SearchInputs& in, const SearchResult& r, std::ostream& out, ReportLimits lim = {});
void write_plan_json(const SearchInputs& in, const SearchResult& r, std::ostream& out, ReportLimits lim = {});

// "TP8 PP1 DP2 ...: predicted 1.23 s/iteration, ... ; runner-up ... is 7% slower (...)".
std::string describe_choice(const SearchInputs& in, const SearchResult& r);

// JSON string literal with escapes (exposed for tests).
std::string json_quote(const std::string& s);

}  // namespace gpt::plan
