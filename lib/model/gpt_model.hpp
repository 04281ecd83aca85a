// One rank's GPT model chunk: flat parameter/gradient buffers described by a ParamLayout,
// a planned activation arena, and hand-written forward/backward over the Backend.
//
// Usage per micro-batch:  set_batch(slot, tokens) [first chunk] or write input_hidden(slot)
// [later pipeline stages]; forward(slot, ...); then backward(slot, ...) with the loss
// gradient [last chunk] or output_grad() filled by the next stage. Parameter gradients
// accumulate (+=) until zero_grads(): micro-batch accumulation is free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/activation_plan.hpp"
#include "model/embedding_head.hpp"
#include "model/fp8_linears.hpp"
#include "model/model_spec.hpp"
#include "model/param_layout.hpp"

namespace gpt::model {

// An arena several chunks of one rank share (ActivationPlan's ArenaPlacement), owned by
// the caller (train::SharedActivations), which also counts its slots' memory.
struct SharedArena {
    std::byte* base = nullptr;
    ArenaPlacement placement;
};

// Bytes one chunk needs: its workspace and one micro-batch slot (for sizing a SharedArena).
struct ArenaNeeds {
    std::size_t workspace = 0, slot = 0;
};

struct ModelMemory {
    std::size_t params = 0;       // model params (dtype)
    std::size_t grads = 0;        // fp32 grads
    std::size_t activations = 0;  // saved activations, all slots (0 in a shared arena)
    std::size_t workspace = 0;    // shared buffers (residual grads, logits, recomputed ones)
};

class GptModel {
public:
    GptModel(const ModelDims& dims, const ChunkSpec& chunk, const ModelOptions& opt,
             int micro_batch, Backend& backend, dist::Communicator& tp, int num_slots = 1,
             std::int64_t buffer_multiple = 1, const SharedArena* shared = nullptr);
    static ArenaNeeds arena_needs(Backend& backend, const ModelDims& dims, const ChunkSpec& chunk,
                                  const ModelOptions& opt, int micro_batch);
    ~GptModel();
    GptModel(const GptModel&) = delete;
    GptModel& operator=(const GptModel&) = delete;

    const ModelDims& dims() const { return dims_; }
    const ChunkSpec& chunk() const { return chunk_; }
    const ModelOptions& options() const { return opt_; }
    const ParamLayout& layout() const { return layout_; }
    const ActivationPlan& plan() const { return plan_; }
    int micro_batch() const { return micro_batch_; }
    std::int64_t tokens() const { return plan_.tokens(); }
    // Rows of the residual stream on this rank, and so of every pipeline boundary tensor
    // (input_hidden, output_hidden, output_grad, input_grad are (hidden_rows(), hidden)):
    // tokens() / tp with sequence parallelism (this rank's sequence shard), else tokens().
    std::int64_t hidden_rows() const { return plan_.hidden_rows(); }
    Backend& backend() { return be_; }
    ModelMemory memory() const;

    // The flat buffers hold padded_elements() >= layout.total_elements() elements, a
    // multiple of the constructor's buffer_multiple (the distributed optimizer's DP size x
    // alignment, so every DP rank owns an equal contiguous shard); the padding stays zero.
    std::int64_t padded_elements() const { return padded_; }
    void* params() { return params_; }   // padded_elements() of dtype
    float* grads() { return grads_; }    // padded_elements() fp32

    // Data-parallel overlap: called during backward with the lowest flat element offset
    // from which this chunk's gradients are final for this micro-batch (after the head,
    // after each layer, 0 after the embedding). Empty: not called.
    using GradReadyHook = std::function<void(std::int64_t first_final)>;
    void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }

    // Megatron's initialisation from opt.seed (see param_init.hpp).
    void init_parameters();
    void init_parameters_host(float* host) const;  // the same values, into a host buffer
    // Whole flat buffer as fp32 on the host (cast from / to dtype).
    void set_parameters(const float* host);
    void get_parameters(float* host) const;
    void get_grads(float* host) const;
    void zero_grads();
    // Sequence parallelism leaves partial gradients, one per TP rank, in the layernorm
    // weights and biases and the row-parallel biases, and --qk-layernorm in the query and key
    // norms (tp_partial_grad): all-reduces exactly those over TP. Call once per iteration
    // after the last micro-batch's backward (Megatron's finalize_model_grads), before
    // gradient clipping. No-op with neither, or with one TP rank.
    void reduce_tp_partial_grads();

    // tokens: host int32 (micro_batch, seq + 1); inputs are [:, :-1], targets [:, 1:].
    // Every chunk needs_batch() (its layers read the documents' positions or starts under
    // --reset-position-ids / --reset-attention-mask), else the first and the last.
    void set_batch(int slot, const std::int32_t* tokens);
    bool needs_batch() const {
        return chunk_.pre_process || chunk_.post_process || opt_.reset_position_ids || opt_.reset_attention_mask;
    }
    // How many of the slot's tokens the loss counts (last chunk, after set_batch): tokens()
    // unless options().loss_mask_token leaves out the predictions made from an EOD input.
    std::int64_t loss_tokens(int slot) const;
    void* input_hidden(int slot);   // (hidden_rows, h), for a chunk without embeddings
    void* output_hidden(int slot);  // (hidden_rows, h), output of a chunk without the head

    // Runs the chunk on the slot's micro-batch. `dropout_stream` must be unique per
    // micro-batch (the trainer uses its global micro-batch counter); dropout off when
    // !training. Returns the summed per-token loss over the counted tokens (last chunk,
    // see loss_tokens), else 0.
    double forward(int slot, bool training, std::uint64_t dropout_stream);
    // Last chunk: dloss_per_token = d objective / d token loss of each counted token (e.g.
    // loss_scale / (loss_tokens x micro-batches)). Other chunks: output_grad() holds
    // dL/d output first.
    void backward(int slot, float dloss_per_token);
    void* output_grad();  // (hidden_rows, h)
    // (hidden_rows, h) dL/d input, after backward of a chunk without embeddings.
    void* input_grad();
    // The last chunk's logits of the micro-batch whose forward ran last: (tokens(), V / tp)
    // in the model dtype, this rank's vocabulary slice, valid until a backward turns them
    // into their gradient (read by inference and the checkpoint converter's logit check).
    const void* logits() const;

    // FP8 linear layers (issue 34; nullptr when the options leave FP8 off or the chunk has
    // no layers): fp8_weights_changed() before every pass (the casts of the weights are
    // redone), fp8_end_step() after a training step's backward (delayed scaling's update).
    Fp8Linears* fp8() { return fp8_.get(); }
    void fp8_weights_changed() {
        if (fp8_) fp8_->weights_changed();
    }
    void fp8_end_step(dist::Communicator& dp) {
        if (fp8_) fp8_->end_step(tp_, dp);
    }

private:
    PassContext context(int slot) const;
    const void* layer_input(const SlotSaved& s, int local_layer) const;
    const void* chunk_output(const SlotSaved& s) const;
    void forward_layer(const PassContext& c, const SlotSaved& s, int local_layer);

    ModelDims dims_;
    ChunkSpec chunk_;
    ModelOptions opt_;
    int micro_batch_;
    Backend& be_;
    dist::Communicator& tp_;
    ParamLayout layout_;
    ActivationPlan plan_;
    std::vector<LayerParamOffsets> layer_params_;
    EmbeddingParams emb_params_{};
    HeadParams head_params_{};
    void* params_ = nullptr;
    float* grads_ = nullptr;
    std::int64_t padded_ = 0;
    GradReadyHook grad_ready_;
    // Flat element ranges [begin, end) of the grads reduce_tp_partial_grads sums.
    struct GradRun {
        std::int64_t begin, end;
    };
    std::vector<GradRun> tp_partial_runs_;
    std::byte* arena_ = nullptr;
    bool own_arena_ = true;
    struct SlotState {
        bool training = false;
        std::uint64_t stream = 0;
        bool forwarded = false;
        // --eod-mask-loss (last chunk): 1/0 per target row in [s, b] order, and how many
        // are 1. Empty mask: every token counts.
        std::vector<float> loss_mask;
        std::int64_t loss_tokens = 0;
    };
    const float* loss_mask(int slot) const;
    std::vector<SlotState> slot_state_;
    // The slot whose logits and softmax statistics the shared workspace holds (-1: none).
    int head_slot_ = -1;
    std::unique_ptr<Fp8Linears> fp8_;
};

}  // namespace gpt::model
