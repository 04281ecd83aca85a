#include "inference/generator.hpp"

#include <algorithm>
#include <chrono>

#include "core/errors.hpp"

namespace gpt::inference {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_batch(KvModel& model, const GenerationRequest& rq, std::size_t first, std::size_t count,
               std::vector<Generation>& out, GenerationStats& stats) {
    const int B = static_cast<int>(count);
    const int max_pos = model.dims().max_positions;
    const std::int64_t V = model.dims().vocab_padded;
    std::vector<std::vector<std::int32_t>> seq(count);
    std::vector<int> len(count), limit(count);
    int shortest = max_pos, longest = 0;
    for (std::size_t b = 0; b < count; ++b) {
        seq[b] = rq.prompts[first + b];
        len[b] = static_cast<int>(seq[b].size());
        GPT_REQUIRE(len[b] > 0, InternalError, "generate: prompt ", first + b, " is empty");
        GPT_REQUIRE(len[b] < max_pos, UsageError, "prompt ", first + b, " has ", len[b],
                    " tokens; the model takes at most --max-position-embeddings ", max_pos,
                    " positions, so nothing could be generated");
        limit[b] = std::min(len[b] + rq.max_new_tokens, max_pos);
        shortest = std::min(shortest, len[b]);
        longest = std::max(longest, limit[b]);
    }
    std::vector<bool> done(count, false);
    auto finished = [&](int p) {  // nothing left to choose at positions >= p
        for (std::size_t b = 0; b < count; ++b)
            if (p < limit[b] && !done[b]) return false;
        return true;
    };
    // Logits predicting position p, from a pass over positions [0, p) (cached or fresh).
    auto logits_for = [&](int p) {
        std::vector<std::int32_t> tok;
        const auto t0 = std::chrono::steady_clock::now();
        if (!rq.use_cache || p == shortest) {
            model.start(B, rq.use_cache ? longest : p);
            for (std::size_t b = 0; b < count; ++b) tok.insert(tok.end(), seq[b].begin(), seq[b].begin() + p);
            std::vector<float> logits = model.forward(tok.data(), p);
            stats.prefill_s += seconds_since(t0);
            stats.prefill_tokens += static_cast<std::int64_t>(tok.size());
            return logits;
        }
        for (std::size_t b = 0; b < count; ++b) tok.push_back(seq[b][static_cast<std::size_t>(p - 1)]);
        std::vector<float> logits = model.forward(tok.data(), 1);
        stats.decode_s += seconds_since(t0);
        stats.decode_tokens += B;
        return logits;
    };
    for (int p = shortest; !finished(p); ++p) {
        const std::vector<float> logits = logits_for(p);
        for (std::size_t b = 0; b < count; ++b) {
            if (p < len[b]) continue;  // still inside its prompt: seq[b][p] is given
            std::int32_t next = rq.eod;  // filler for a finished sequence (never reported)
            if (!done[b] && p < limit[b]) {
                const float* row = logits.data() + static_cast<std::int64_t>(b) * V;
                next = pick_token(row, rq.vocab, rq.sampling, first + b, static_cast<std::uint64_t>(p));
                Generation& g = out[first + b];
                g.tokens.push_back(next);
                g.log_probs.push_back(log_prob(row, V, next));
                if (next == rq.eod) done[b] = g.eod = true;
            }
            seq[b].push_back(next);
        }
    }
}

}  // namespace

std::vector<Generation> generate(KvModel& model, const GenerationRequest& rq, GenerationStats* stats) {
    validate(rq.sampling);
    GPT_REQUIRE(rq.max_new_tokens >= 0, UsageError, "--max-new-tokens ", rq.max_new_tokens, " must be >= 0");
    GPT_REQUIRE(rq.batch_size > 0, UsageError, "--batch-size ", rq.batch_size, " must be positive");
    GPT_REQUIRE(rq.vocab > 0 && rq.vocab <= model.dims().vocab_padded, InternalError, "generate: vocab ", rq.vocab);
    std::vector<Generation> out(rq.prompts.size());
    GenerationStats local;
    for (std::size_t first = 0; first < rq.prompts.size(); first += static_cast<std::size_t>(rq.batch_size))
        run_batch(model, rq, first, std::min<std::size_t>(static_cast<std::size_t>(rq.batch_size), rq.prompts.size() - first), out,
                  stats ? *stats : local);
    return out;
}

}  // namespace gpt::inference
