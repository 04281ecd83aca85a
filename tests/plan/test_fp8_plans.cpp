// Issue 34: the planner knows FP8. The linear layers' GEMMs at the FP8 peak (half the time on
// Hopper, the same efficiency curve), the rest 16-bit; the FP8 weight copies and scaling
// state in the memory model, as a hand computation gives them; A100 refused; the plan-only
// report says FP8 is on, its recipe and its share of the GEMM time.
#include <gtest/gtest.h>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cstdlib>
#include <sstream>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "plan/memory_model.hpp"
#include "plan/planner.hpp"
#include "plan/time_model.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

ModelShape with_fp8(ModelShape m, Fp8Scheme scheme = Fp8Scheme::Hybrid) {
    m.fp8.fp8_format = scheme;
    return m;
}

Layout one_layout(int tp, int pp, int dp, int mbs, int gbs) {
    Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    l.micro_batch = mbs;
    l.global_batch = gbs;
    l.sequence_parallel = tp > 1;
    return l;
}

TEST(Fp8Plans, HopperPresetsHaveTwiceTheBf16PeakA100None) {
    EXPECT_EQ(find_device_preset("h100-80gb").peak_tflops_fp8, 1979);
    EXPECT_EQ(find_device_preset("h200").peak_tflops_fp8, 1979);
    EXPECT_EQ(find_device_preset("h100-80gb").peak_tflops_16bit, 989);
    EXPECT_EQ(find_device_preset("a100-40gb").peak_tflops_fp8, 0);
    EXPECT_EQ(find_device_preset("a100-80gb").peak_tflops_fp8, 0);
}

TEST(Fp8Plans, LinearGemmsTakeAboutHalfTheTime) {
    const ModelShape m16 = gpt22b();
    ModelShape m8 = with_fp8(gpt22b());
    m8.fp8_gelu_epilogue = true;  // GELU in fc1's epilogue, as the 16-bit layers
    const DevicePreset& h100 = find_device_preset("h100-80gb");
    const Layout l = one_layout(8, 1, 1, 1, 8);
    const LinearGemmSeconds a = linear_gemm_seconds(m16, l, h100, false);
    const LinearGemmSeconds b = linear_gemm_seconds(m8, l, h100, true);
    // The same efficiency curve (it depends on the GEMM's FLOPs only) at 1979 instead of 989.
    const double ratio = 989.0 / 1979.0;
    EXPECT_NEAR(b.forward / a.forward, ratio, 1e-12);
    EXPECT_NEAR(b.data_grad / a.data_grad, ratio, 1e-12);
    EXPECT_NEAR(b.weight_grad / a.weight_grad, ratio, 1e-12);
    EXPECT_NEAR(b.total() / a.total(), ratio, 1e-12);
    // GPT_FP8_GELU=pass (the default): fc1's forward GEMM and fc2's data gradient run at the
    // plain rate, so the four forward GEMMs and the four data-gradient GEMMs take what the
    // four weight-gradient GEMMs (the same FLOPs, all plain) take.
    {
        ModelShape pass = m8;
        pass.fp8_gelu_epilogue = false;
        const LinearGemmSeconds p = linear_gemm_seconds(pass, l, h100, true);
        EXPECT_DOUBLE_EQ(p.forward, p.weight_grad);
        EXPECT_DOUBLE_EQ(p.data_grad, p.weight_grad);
        EXPECT_LT(p.forward, b.forward);
        EXPECT_LT(p.data_grad, b.data_grad);
        EXPECT_DOUBLE_EQ(p.weight_grad, b.weight_grad);
    }
    // --no-fp8-wgrad: the weight gradient stays 16-bit.
    ModelShape no_wgrad = m8;
    no_wgrad.fp8.fp8_wgrad = false;
    const LinearGemmSeconds c = linear_gemm_seconds(no_wgrad, l, h100, true);
    EXPECT_DOUBLE_EQ(c.weight_grad, a.weight_grad);
    EXPECT_DOUBLE_EQ(c.forward, b.forward);
    EXPECT_DOUBLE_EQ(c.data_grad, b.data_grad);
}

TEST(Fp8Plans, IterationTimeRunsOnlyTheLinearGemmsInFp8) {
    const DevicePreset& h100 = find_device_preset("h100-80gb");
    const ModelShape m16 = gpt22b();
    ModelShape m8 = with_fp8(gpt22b());
    m8.fp8_gelu_epilogue = true;  // fc1's GEMMs carry the same epilogue in both (the pass: below)
    const Layout l = one_layout(8, 1, 1, 1, 8);
    const Placement pl = place(8, 8, 8, 1);
    const TimeBreakdown t16 = iteration_time(m16, l, h100, default_fabric(h100), pl);
    const TimeBreakdown t8 = iteration_time(m8, l, h100, default_fabric(h100), pl);
    const double mcount = l.micro_batches(), layers = m16.num_layers;
    const LinearGemmSeconds lin16 = linear_gemm_seconds(m16, l, h100, false);
    const LinearGemmSeconds lin8 = linear_gemm_seconds(m8, l, h100, true);
    EXPECT_EQ(t16.gemm_fp8, 0.0);
    EXPECT_NEAR(t8.gemm_fp8, layers * mcount * lin8.total(), 1e-9 * t8.gemm_fp8);
    // What is not a linear GEMM (attention's batched GEMMs, the LM head) is the same time.
    EXPECT_NEAR(t8.gemm - t8.gemm_fp8, t16.gemm - layers * mcount * lin16.total(), 1e-9 * t16.gemm);
    // The linear GEMMs' modelled time about halves.
    EXPECT_NEAR(t8.gemm_fp8 / (layers * mcount * lin16.total()), 0.5, 0.001);
    // The casts give some of it back, memory-bound, as counted by hand: per layer and
    // micro-batch the inputs of QKV, projection, fc1 and fc2, T (h + h/t + h + f/t), read as
    // bf16 and written as FP8 (3 bytes) forward and again for the weight gradient; the output
    // gradients, T (3h/t + h + f/t + h), read and written twice (4 bytes); once per iteration
    // the linear weights, read and written twice (4 bytes). With the fused input cast (the
    // default) QKV's and fc1's forward inputs cost only their codes' byte, over the norms'
    // sequence-parallel shards (T h / t each), and the forward all-gathers move those bytes.
    // With the GELU pass (GPT_FP8_GELU=pass, the default) where the 16-bit layers have GELU
    // in fc1's epilogue, that pass reads and writes fc1's output (4 bytes, T f / t) and, with
    // the fused input cast, writes fc2's codes (1 byte instead of the cast's 3); backward,
    // fc1's output-gradient cast reads the pre-activation too (2 bytes, T f / t).
    const double T = 2048, h = 6144, f = 4 * h, t = 8;
    const double inputs = T * (h + h / t + h + f / t), grads = T * (3 * h / t + h + f / t + h);
    const double weights = (3 * h * h + h * h + f * h + h * f) / t;
    for (bool fused : {true, false})
    for (bool gelu_epilogue : {false, true}) {
        SCOPED_TRACE(fused ? "fused input cast" : "separate casts");
        SCOPED_TRACE(gelu_epilogue ? "GELU in fc1's epilogue" : "GELU pass");
        ModelShape m = m8;
        m.fp8_fused_input_cast = fused;
        m.fp8_gelu_epilogue = gelu_epilogue;
        const TimeBreakdown tf = iteration_time(m, l, h100, default_fabric(h100), pl);
        const double fc2_codes = fused && !gelu_epilogue ? 1 : 3;
        const double fused_forward = 2 * T * h / t + T * (h / t) * 3 + T * (f / t) * fc2_codes;
        const double gelu_pass = gelu_epilogue ? 0 : (4 + 2) * T * f / t;
        const double cast_bytes =
            layers * mcount * ((fused ? fused_forward : inputs * 3) + gelu_pass + grads * 4 + inputs * 3) +
            layers * weights * 4;
        const double cast_seconds = cast_bytes / (3350e9 * 0.75);
        EXPECT_NEAR(tf.compute - (t16.compute - (t16.gemm - tf.gemm)), cast_seconds, 1e-6 * cast_seconds);
        EXPECT_LT(cast_seconds, 0.5 * (t16.gemm - tf.gemm));
        const Fabric fab = default_fabric(h100);
        const double saved = fused ? layers * mcount *
                                         (2 * allreduce_seconds(2 * T * h, 8, fab.intra_node_gbps, h100.intra_node_latency_us) -
                                          2 * allreduce_seconds(1.5 * T * h, 8, fab.intra_node_gbps, h100.intra_node_latency_us))
                                   : 0.0;
        EXPECT_NEAR(tf.tp_comm, t16.tp_comm - saved, 1e-9 * t16.tp_comm);
        if (fused) {
            EXPECT_LT(tf.tp_comm, t16.tp_comm);
        }
    }
    EXPECT_DOUBLE_EQ(t8.optimizer, t16.optimizer);

    // --first-last-layers-bf16: the first and last layers' GEMMs stay 16-bit.
    ModelShape ends = m8;
    ends.fp8.fp8_recipe = Fp8Recipe::Tensorwise;
    ends.fp8.first_last_layers_bf16 = true;
    ends.fp8.num_layers_at_start_in_bf16 = 2;
    ends.fp8.num_layers_at_end_in_bf16 = 1;
    const TimeBreakdown te = iteration_time(ends, l, h100, default_fabric(h100), pl);
    EXPECT_NEAR(te.gemm_fp8, (layers - 3) * mcount * lin8.total(), 1e-9 * te.gemm_fp8);
    EXPECT_NEAR(te.gemm - te.gemm_fp8, t16.gemm - (layers - 3) * mcount * lin16.total(), 1e-9 * t16.gemm);

    // --no-fp8-wgrad: the weight-gradient GEMMs are in the 16-bit share.
    ModelShape no_wgrad = m8;
    no_wgrad.fp8.fp8_wgrad = false;
    const TimeBreakdown tw = iteration_time(no_wgrad, l, h100, default_fabric(h100), pl);
    EXPECT_NEAR(tw.gemm_fp8, layers * mcount * (lin8.forward + lin8.data_grad), 1e-9 * tw.gemm_fp8);
    EXPECT_GT(tw.compute, t8.compute);
}

TEST(Fp8Plans, Bf16LayersFollowTheStagesChunks) {
    ModelShape m = with_fp8(gpt(8, 1024, 16, 1024));
    m.fp8.fp8_recipe = Fp8Recipe::Tensorwise;
    m.fp8.first_last_layers_bf16 = true;
    m.fp8.num_layers_at_start_in_bf16 = 1;
    m.fp8.num_layers_at_end_in_bf16 = 2;
    // PP 2: layers 0-3 and 4-7; 16-bit: 0, 6 and 7.
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 1, 0), 3);
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 1, 1), 2);
    // 12 layers, 3 at the start and 1 at the end 16-bit, PP 2 x VP 3 (chunks of 2 layers):
    // stage 0 holds layers 0, 1, 4, 5, 8, 9 (16-bit: 0, 1); stage 1 holds 2, 3, 6, 7, 10, 11
    // (16-bit: 2, 11).
    m.num_layers = 12;
    m.fp8.num_layers_at_start_in_bf16 = 3;
    m.fp8.num_layers_at_end_in_bf16 = 1;
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 3, 0), 4);
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 3, 1), 4);
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 1, 0), 3);  // layers 0-5 without interleaving
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 1, 1), 5);
    m.fp8.first_last_layers_bf16 = false;
    EXPECT_EQ(fp8_layers_on_stage(m, 2, 3, 1), 6);
    m.fp8.fp8_format = Fp8Scheme::None;
    EXPECT_EQ(fp8_layers_on_stage(m, 1, 1, 0), 0);
}

TEST(Fp8Plans, MemoryTermMatchesAHandComputation) {
    // 4 layers, h 64, f 256, 4 heads, seq 32, hybrid with delayed scaling and 16 steps of history.
    ModelShape m = with_fp8(gpt(4, 64, 4, 32));
    m.fp8.fp8_amax_history_len = 16;
    // Linear weights per layer: QKV 192 x 64 + projection 64 x 64 + fc1 256 x 64 + fc2 64 x 256.
    const double weights = 192 * 64 + 64 * 64 + 256 * 64 + 64 * 256;  // 49152
    ASSERT_EQ(layer_linear_weights_per_rank(m, 1), 49152);
    // An FP8 copy and a transposed one (2 bytes a weight); 4 GEMMs x 3 operands x (amax,
    // scale, scale_inv) x 4 bytes on the device (the 16-step history is host memory).
    const double per_layer = 2 * weights + 4 * 3 * 3 * 4;  // 98448
    EXPECT_DOUBLE_EQ(fp8_bytes_per_layer(m, 1), per_layer);
    EXPECT_DOUBLE_EQ(fp8_bytes_per_layer(m, 2), 2 * weights / 2 + 4 * 3 * 3 * 4);
    // Per chunk: the input and output-gradient codes and their transposes, 32 tokens x the
    // widest linear dimension (fc1's 256) each.
    const double workspace = 4 * 32 * 256;
    const DevicePreset& h100 = find_device_preset("h100-80gb");
    const Layout l = one_layout(1, 1, 1, 1, 1);
    const MemoryBreakdown with = stage_memory(m, l, h100, 0);
    const MemoryBreakdown without = stage_memory(gpt(4, 64, 4, 32), l, h100, 0);
    EXPECT_DOUBLE_EQ(with.fp8, 4 * per_layer + workspace);
    EXPECT_DOUBLE_EQ(without.fp8, 0.0);
    // Nothing else moves: saved activations stay 16-bit.
    EXPECT_DOUBLE_EQ(with.weights, without.weights);
    EXPECT_DOUBLE_EQ(with.activations, without.activations);
    EXPECT_DOUBLE_EQ(with.buffers, without.buffers);
    EXPECT_DOUBLE_EQ(with.total() - without.total(), 4 * per_layer + workspace);

    // --first-last-layers-bf16 layers hold no FP8 weight copies.
    m.fp8.fp8_recipe = Fp8Recipe::Tensorwise;
    m.fp8.first_last_layers_bf16 = true;
    EXPECT_DOUBLE_EQ(stage_memory(m, l, h100, 0).fp8, 2 * per_layer + workspace);
}

TEST(Fp8Plans, SearchKeepsToFp8Shapes) {
    // seq 40: a micro-batch of 1 is 40 tokens, not a multiple of 16; 2 is 80.
    ModelShape m = with_fp8(gpt(8, 1024, 16, 40));
    SearchInputs in = inputs(m, "h100-80gb", 8, 8, 80);
    in.global_batch = 16;
    const SearchResult r = search_layouts(in);
    ASSERT_FALSE(r.feasible.empty());
    for (const Candidate& c : r.feasible) EXPECT_EQ(c.layout.micro_batch * 40 % 16, 0) << c.layout.describe();
    m.fp8.fp8_format = Fp8Scheme::None;
    in.model = m;
    bool mbs1 = false;
    for (const Candidate& c : search_layouts(in).feasible) mbs1 |= c.layout.micro_batch == 1;
    EXPECT_TRUE(mbs1);

    // hidden 256 over TP 32: 8 columns a rank, too few for an FP8 GEMM.
    SearchInputs wide = inputs(with_fp8(gpt(4, 256, 32, 256)), "h100-80gb", 32, 32, 80);
    wide.tp = 32;
    wide.global_batch = 1;
    const SearchResult w = search_layouts(wide);
    EXPECT_TRUE(w.feasible.empty());
    ASSERT_FALSE(w.rejected.empty());
    EXPECT_NE(w.rejected.front().reason.find("FP8: --hidden-size 256 / --tensor-model-parallel-size 32 = 8"),
              std::string::npos)
        << w.rejected.front().reason;
}

// configs/gpt22b.ini in bf16 with FP8, planned for 2 x 8 of `device`.
Config fp8_config(const char* device) {
    Config c = parse_args({"--config", gpt::test::source_dir() + "/configs/gpt22b.ini", "--train-iters", "1",
                           "--fp8-format", "hybrid", "--plan-only", "--world-size", "16", "--local-world-size", "8",
                           "--max-global-batch-size", "32", "--plan-device", device})
                   .config;
    c.training.fp16 = false;  // the file's fp16 = true: FP8 trains in bf16
    c.training.bf16 = true;
    validate_model_and_training(c);
    return c;
}

TEST(Fp8Plans, A100IsRefused) {
    for (const char* a100 : {"a100-40gb", "a100-80gb"}) {
        const Config c = fp8_config(a100);
        try {
            std::ostringstream out;
            print_plan(c, out);
            ADD_FAILURE() << "FP8 planned on " << a100;
        } catch (const UsageError& e) {
            const std::string m = e.what();
            EXPECT_EQ(m.find("--fp8-format hybrid: the planner's device " + std::string(a100) + " has no FP8 tensor cores"),
                      0u)
                << m;
            EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        }
        SearchInputs in = inputs(with_fp8(gpt22b()), a100, 16, 8, 80);
        in.global_batch = 16;
        EXPECT_THROW(search_layouts(in), UsageError);
    }
    std::ostringstream out;
    EXPECT_NO_THROW(print_plan(fp8_config("h200"), out));
}

TEST(Fp8Plans, PlanOnlySaysFp8IsOnItsRecipeAndItsShare) {
    setenv("DEVICE_MEMORY_GB", "80", 1);
    Config c = fp8_config("h100-80gb");
    std::ostringstream table;
    print_plan(c, table);
    const std::string t = table.str();
    EXPECT_NE(t.find("FP8 hybrid (E4M3 forward, E5M2 gradients), recipe delayed (amax history 1, most_recent, "
                     "margin 0): the linear layers' forward, data-gradient and weight-gradient GEMMs at 1979 "
                     "TFLOP/s peak"),
              std::string::npos)
        << t;
    const std::size_t share = t.find("; FP8 GEMMs: ");
    ASSERT_NE(share, std::string::npos) << t;
    const double percent = std::atof(t.c_str() + share + 13);
    EXPECT_GT(percent, 40.0);
    EXPECT_LT(percent, 90.0);

    c.plan.plan_format = PlanFormat::Json;
    std::ostringstream json;
    print_plan(c, json);
    EXPECT_NE(json.str().find("\"fp8\": {\"enabled\": true, \"format\": \"hybrid\", \"recipe\": \"delayed\""),
              std::string::npos)
        << json.str();
    boost::property_tree::ptree tree;
    std::istringstream js(json.str());
    ASSERT_NO_THROW(boost::property_tree::read_json(js, tree)) << json.str();
    EXPECT_EQ(tree.get<int>("fp8.peak_tflops"), 1979);
    for (const auto& [key, row] : tree.get_child("feasible")) {
        const double fp8_bytes = row.get<double>("memory_bytes.fp8");
        EXPECT_GT(fp8_bytes, 0);
        EXPECT_NEAR(row.get<double>("memory_bytes.total"),
                    row.get<double>("memory_bytes.weights") + row.get<double>("memory_bytes.gradients") +
                        row.get<double>("memory_bytes.optimizer") + row.get<double>("memory_bytes.activations") +
                        row.get<double>("memory_bytes.buffers") + row.get<double>("memory_bytes.fragmentation") +
                        fp8_bytes,
                    1e-5 * row.get<double>("memory_bytes.total"));
        EXPECT_GT(row.get<double>("gemm_seconds.fp8"), 0);
        EXPECT_LT(row.get<double>("gemm_seconds.fp8"), row.get<double>("gemm_seconds.total"));
        EXPECT_LT(row.get<double>("gemm_seconds.total"), row.get<double>("time_seconds.compute"));
    }

    // The 16-bit layers of --first-last-layers-bf16, by number.
    Config ends = fp8_config("h100-80gb");
    ends.fp8.fp8_recipe = Fp8Recipe::Tensorwise;
    ends.fp8.first_last_layers_bf16 = true;
    ends.fp8.num_layers_at_start_in_bf16 = 2;
    std::ostringstream ends_table;
    print_plan(ends, ends_table);
    EXPECT_NE(ends_table.str().find("FP8 hybrid (E4M3 forward, E5M2 gradients), recipe tensorwise: the linear "
                                    "layers' forward, data-gradient and weight-gradient GEMMs at 1979 TFLOP/s peak; "
                                    "16-bit layers 1-2 and 48 (--first-last-layers-bf16)"),
              std::string::npos)
        << ends_table.str();

    // Without FP8 the report has no FP8 line and says so in the JSON.
    Config off = c;
    off.fp8.fp8_format = Fp8Scheme::None;
    std::ostringstream off_json, off_table;
    print_plan(off, off_json);
    EXPECT_NE(off_json.str().find("\"fp8\": {\"enabled\": false}"), std::string::npos);
    off.plan.plan_format = PlanFormat::Table;
    print_plan(off, off_table);
    EXPECT_EQ(off_table.str().find("FP8"), std::string::npos) << off_table.str();
    unsetenv("DEVICE_MEMORY_GB");
}

}  // namespace
}  // namespace gpt::plan::test
