// Table and JSON reports: valid JSON holding the same rows as the table.
#include <gtest/gtest.h>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "plan/report.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

struct Row {
    int tp, pp, dp, vp, mbs, gbs;
    std::string recompute;
};

// The table's data rows: lines that start with the rank number.
std::vector<Row> table_rows(const std::string& table) {
    std::vector<Row> rows;
    std::istringstream in(table);
    std::string line;
    bool in_table = false;
    while (std::getline(in, line)) {
        if (line.find("#  TP") != std::string::npos || line.rfind("  # ", 0) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        std::istringstream ls(line);
        int rank;
        Row r;
        if (!(ls >> rank >> r.tp >> r.pp >> r.dp >> r.vp >> r.mbs >> r.gbs)) break;
        int m;
        ls >> m >> r.recompute;
        rows.push_back(r);
    }
    return rows;
}

TEST(Report, JsonIsValidAndHasTheTableRows) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    SearchResult r = search_layouts(in);
    std::ostringstream table, json;
    write_plan_table(in, r, table);
    write_plan_json(in, r, json);

    boost::property_tree::ptree tree;
    std::istringstream js(json.str());
    ASSERT_NO_THROW(boost::property_tree::read_json(js, tree)) << json.str();
    std::vector<Row> rows = table_rows(table.str());
    ASSERT_EQ(rows.size(), 15u) << table.str();
    const auto& feasible = tree.get_child("feasible");
    ASSERT_EQ(feasible.size(), rows.size());
    std::size_t i = 0;
    for (const auto& [key, row] : feasible) {
        EXPECT_EQ(row.get<int>("rank"), int(i + 1));
        EXPECT_EQ(row.get<int>("tp"), rows[i].tp);
        EXPECT_EQ(row.get<int>("pp"), rows[i].pp);
        EXPECT_EQ(row.get<int>("dp"), rows[i].dp);
        EXPECT_EQ(row.get<int>("vp"), rows[i].vp);
        EXPECT_EQ(row.get<int>("micro_batch_size"), rows[i].mbs);
        EXPECT_EQ(row.get<int>("global_batch_size"), rows[i].gbs);
        EXPECT_EQ(row.get<std::string>("recompute"), rows[i].recompute);
        double total = row.get<double>("memory_bytes.total");
        double parts = row.get<double>("memory_bytes.weights") + row.get<double>("memory_bytes.gradients") +
                       row.get<double>("memory_bytes.optimizer") + row.get<double>("memory_bytes.activations") +
                       row.get<double>("memory_bytes.buffers") + row.get<double>("memory_bytes.fragmentation") +
                       row.get<double>("memory_bytes.fp8");
        EXPECT_NEAR(total, parts, 1e-5 * total);
        EXPECT_GT(row.get<double>("tokens_per_second"), 0);
        ++i;
    }
    EXPECT_EQ(tree.get<std::size_t>("feasible_total"), r.feasible.size());
    EXPECT_EQ(tree.get<int>("cluster.world_size"), 16);
    EXPECT_EQ(tree.get<long long>("model.parameters"), 22068768768LL);
    ASSERT_FALSE(tree.get_child("rejected").empty());
    for (const auto& [key, rej] : tree.get_child("rejected")) EXPECT_FALSE(rej.get<std::string>("reason").empty());
    // The table names the rejections too.
    EXPECT_NE(table.str().find("Rejected:"), std::string::npos);
    EXPECT_NE(table.str().find("spans nodes"), std::string::npos);
}

TEST(Report, JsonQuoteEscapes) {
    EXPECT_EQ(json_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    EXPECT_EQ(json_quote(std::string("\x01", 1)), "\"\\u0001\"");
}

TEST(Report, ChoiceNamesRunnerUp) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    SearchResult r = search_layouts(in);
    std::string s = describe_choice(in, r);
    EXPECT_NE(s.find("planner chose TP"), std::string::npos) << s;
    EXPECT_NE(s.find("runner-up TP"), std::string::npos) << s;
    // "x% fewer tokens/s" is the runner-up's shortfall relative to the choice: 0..100%.
    const Candidate* ru = runner_up(r);
    ASSERT_NE(ru, nullptr);
    char expect[64];
    std::snprintf(expect, sizeof expect, "%.1f%% fewer tokens/s",
                  100 * (1 - ru->tokens_per_second / r.feasible.front().tokens_per_second));
    EXPECT_NE(s.find(expect), std::string::npos) << s;
}

}  // namespace
}  // namespace gpt::plan::test
