#pragma once
// Model shapes (transformers) and the quantities derived from them: parameter counts per
// unit, FLOPs per token, activation bytes per layer.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/mla.hpp"
#include "engine/scenario/moe.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::scenario {

enum class ModelKind { decoder, encoder };
enum class MlpKind { gelu, swiglu };
enum class NormKind { layernorm, rmsnorm };
enum class PositionKind { learned, rotary };
/// Activation recomputation: none; Megatron's selective (the attention core); torchtitan's
/// per-op selective checkpointing (selective_op: save every other matmul's output, the
/// attention output and the reduce-scatter outputs, recompute the rest); full (each block's
/// input only).
enum class Recompute { none, selective, selective_op, full };

/// One unit of a measured model: what Accelerator::export_scenario() measured on a user's
/// LibTorch model, per sample (one row of the batch).
struct MeasuredUnit {
  std::string name;
  double params = 0;
  double forward_flops = 0;     ///< forward FLOPs per sample (as the LibTorch profiler counts)
  double activation_bytes = 0;  ///< bytes the forward keeps for backward per sample
};

/// The measured form of a model (`"model": {"measured": {...}}`): units of any shape in the
/// plan's order (input, blocks, output) instead of a transformer's formulas.
struct MeasuredModel {
  MeasuredUnit input;                ///< the root's parameters used before the first block
  std::vector<MeasuredUnit> blocks;  ///< the model's units (FSDP/pipeline granularity)
  MeasuredUnit output;               ///< the root's parameters used after; the loss
  /// Bytes per sample of a block's output (what a pipeline stage sends to the next).
  double boundary_bytes = 0;
  /// Bytes per activation element when measured (4: fp32); other precisions scale by theirs.
  double element_bytes = 4;
  std::string source;  ///< where and how it was measured
};

struct ModelSpec {
  std::string name;
  ModelKind kind = ModelKind::decoder;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  ///< grouped-query attention; == heads for multi-head
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;  ///< learned position table rows (0 with rotary)
  std::int64_t type_vocab = 0;     ///< BERT token-type embeddings
  bool tied_embeddings = false;
  bool bias = true;
  bool pooler = false;  ///< BERT pooler (h·h + h)
  MlpKind mlp = MlpKind::gelu;
  NormKind norm = NormKind::layernorm;
  PositionKind positions = PositionKind::learned;
  /// Set only for the quick form {"params": P, "layers": l}: the total is given, the shape
  /// (hidden ≈ sqrt(P / 12l)) is an estimate used for FLOPs and activations.
  double params_given = 0;
  /// Set only for the measured form; layers = its blocks, hidden = the boundary's width.
  std::shared_ptr<const MeasuredModel> measured;
  /// Width of one attention head when the config gives it apart from hidden / heads (Qwen3,
  /// GPT-OSS: heads · head_dim ≠ hidden); 0: hidden / heads.
  std::int64_t head_dim = 0;
  /// An RMSNorm of head_dim on each head's query and key (Qwen3 `q_norm`, `k_norm`).
  bool qk_norm = false;
  /// One learned logit per head that takes part in the softmax (GPT-OSS attention sinks).
  bool attention_sinks = false;
  /// Sliding-window attention (GPT-OSS, Gemma, Mistral 7B): a block's queries attend to the last
  /// `tokens` positions only; every `full_every`-th block (i + 1 a multiple of it) attends to the
  /// whole sequence (0: none does). GPT-OSS: 128 tokens, every 2nd block full (HF layer_types
  /// alternate sliding, full).
  struct SlidingWindow {
    std::int64_t tokens = 0;
    std::int64_t full_every = 0;
  };
  std::optional<SlidingWindow> sliding_window;
  /// Multi-head latent attention (DeepSeek-V2/V3) instead of multi-head/grouped-query.
  std::optional<MlaSpec> mla;
  /// Mixture-of-experts blocks.
  std::optional<MoeSpec> moe;
  /// DeepSeek-V3's multi-token prediction modules after the last block, each an extra block of
  /// the last block's kind, two RMSNorms, a 2h×h projection and a final norm, sharing the
  /// embedding and LM head (DeepSeek-V3 report §2.2).
  std::int64_t mtp_layers = 0;
};

/// The key and reason when `m` has a feature the planner, simulator and runtime do not model
/// yet (latent attention, sliding windows, attention sinks, MTP): `info` describes such a model,
/// simulating it is refused by name.
/// (Mixture-of-experts models are planned and simulated; expert_mesh.hpp
/// unsimulated_moe_strategy names what of them is not yet, the runtime refuses them.)
struct UnsimulatedFeature {
  std::string key;  ///< "model.moe", ...
  std::string what;
  explicit operator bool() const { return !key.empty(); }
};
UnsimulatedFeature unsimulated_feature(const ModelSpec& m);

/// Whether block `i` (0-based) attends through a sliding window (model.sliding_window).
bool sliding_window_block(const ModelSpec& m, std::int64_t i);
/// Forward FLOPs per token of every block's attention core, each at its own span (the sequence,
/// or min(seq, window) for a sliding-window block).
double blocks_attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq_len);

/// The width of one attention head (m.head_dim, else hidden / heads).
std::int64_t attention_head_dim(const ModelSpec& m);

/// Parses a model object (already merged with its preset). `path` prefixes errors.
ModelSpec parse_model(const nlohmann::json& object, const std::string& path);

/// The vocabulary as the embedding and LM head hold it: with tensor parallelism (tp > 1)
/// padded up to a multiple of 128·tp, as Megatron-LM's --make-vocab-size-divisible-by 128
/// does; tp = 1 keeps the model's own size (as HuggingFace models and FSDP train it).
std::int64_t padded_vocab(const ModelSpec& m, int tp);

/// Width of the key and value projections: h · kv_heads / heads (grouped-query attention;
/// kv_heads · head_dim where head_dim is given).
double kv_dim(const ModelSpec& m);
/// Parameters of one norm: 2h for LayerNorm (weight and bias), h for RMSNorm.
double norm_params(const ModelSpec& m);

/// Parameters of one (dense) transformer block (attention + MLP + norms).
double block_params(const ModelSpec& m);

/// A block's MLP: one dense MLP, or a mixture of experts (model.moe).
enum class BlockKind { dense, moe };
/// Blocks of a kind: with model.moe its MoE blocks and the rest; without, all dense.
std::int64_t block_count(const ModelSpec& m, BlockKind kind);

/// A block's parameters by part; attention + mlp + norms + router add up to its parameters
/// (block_params for a dense block; quick-form models, whose parts are unknown, put the whole
/// block under `mlp`).
struct BlockParamsBreakdown {
  double attention = 0;  ///< q, k, v, o matrices (+ biases, sinks); MLA's matrices and latent norms
  double mlp =
      0;  ///< two matrices (three with SwiGLU) (+ biases); MoE: every routed and shared expert
  double norms = 0;   ///< the block's two norms (+ the per-head q/k norms)
  double router = 0;  ///< MoE: the gate, experts × h (+ per-expert bias)
  double mlp_active =
      0;  ///< the MLP parameters one token runs: mlp, or top_k routed + shared experts
};
BlockParamsBreakdown block_params_breakdown(const ModelSpec& m, BlockKind kind = BlockKind::dense);
/// One routed expert's parameters (its MLP of expert_ffn_hidden: matrices + biases); 0 without
/// model.moe.
double routed_expert_params(const ModelSpec& m);
/// Parameters of the input unit: token (+ position, + type) embeddings (+ BERT's LN).
double embedding_params(const ModelSpec& m);
/// Parameters of the output unit: final norm, LM head when untied, BERT pooler.
double head_params(const ModelSpec& m);
/// All parameters, counted once (tied embeddings shared); MTP modules not included (as
/// DeepSeek-V3's card counts its 671B: mtp_params apart).
double total_params(const ModelSpec& m);
/// The parameters one token's forward runs through: embedding, head and each block with only
/// its top_k routed experts (+ shared) — as Mixtral's and Qwen3's cards count "active"; equal to
/// total_params for dense models. DeepSeek's and GPT-OSS's cards leave the input embedding out.
double active_params(const ModelSpec& m);
/// The parameters of the MTP modules beyond the shared embedding and head.
double mtp_params(const ModelSpec& m);
/// The weight matrices one token multiplies in a block (q, k, v, o or MLA's, and the MLP's; an
/// MoE block: the router's and top_k routed + shared experts'; no biases or norms).
double block_matmul_params(const ModelSpec& m, BlockKind kind = BlockKind::dense);
/// Weights that take part in matrix multiplies per token (blocks' matrices + LM head; + each
/// MTP module's block, projection and LM head).
double matmul_params(const ModelSpec& m);

/// Training FLOPs per token, forward + backward, no recomputation (a measured model: 3× its
/// units' measured forward FLOPs per sample / seq_len); for transformers:
///   6·N_matmul + 12·l·h·s
/// where N_matmul counts the blocks' weight matrices and the LM head (V·h). For GPT shapes
/// this is Korthikanti et al. (2022) eq. 7 divided by B·s: 72·l·h² + 12·l·h·s + 6·V·h. Models
/// with other attention (MLA, head_dim) count 3× attention_core_flops_per_token per block instead
/// of 12·h·s, and MTP modules add their block, projection and head.
double training_flops_per_token(const ModelSpec& m, std::int64_t seq_len);
/// Forward FLOPs of one block for one token (2·block matmul params + the attention core).
double block_forward_flops_per_token(const ModelSpec& m, std::int64_t seq_len,
                                     BlockKind kind = BlockKind::dense);
/// Forward FLOPs of one block's attention core per token, Q·Kᵀ and scores·V without the causal
/// saving: 2·s·a·(d_qk + d_v) — 4·h·s for multi-head and grouped-query attention with
/// a·d = h; MLA: d_qk = qk_nope + qk_rope, d_v = v_head_dim.
double attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq_len);
/// Forward FLOPs of the head per token (2·V·h; a measured model's output unit / seq_len).
double head_forward_flops_per_token(const ModelSpec& m, std::int64_t seq_len);

/// How a block's activations are laid out on one rank: spread over tensor-parallel ranks
/// (Megatron-LM TP/SP) and context-parallel ranks (each holds s/cp tokens), which attention
/// kernel runs, and whether the linear layers' saved inputs are fp8 (Transformer Engine).
struct ActivationLayout {
  int tp = 1;
  bool sequence_parallel = false;
  int cp = 1;
  bool flash = false;       ///< fused attention: no s×s tensors, a fp32 log-sum-exp per row
  bool fp8_inputs = false;  ///< the linear layers' inputs saved in fp8 (1 byte, not 2)
};

/// One linear layer on one tensor-parallel rank: its output and input widths.
struct LinearShape {
  double out = 0, in = 0;
};

/// One block's linear layers on one tensor-parallel rank, in the order torchtitan's Llama (and
/// HuggingFace's) runs them: wq, wk, wv, wo, then w1, w3, w2 (SwiGLU) or fc1, fc2. The
/// row-parallel wo and w2/fc2 read a 1/t share and write their full-width partial sums.
std::vector<LinearShape> block_linears(const ModelSpec& m, int tp);

/// Whether torchtitan's per-op selective checkpointing (torchtitan/distributed/
/// activation_checkpoint.py, `_get_custom_policy`: `aten.mm` outputs are saved when the
/// block's mm count is odd, recomputed when even) saves linear `linear` of block_linears. A linear
/// with a bias runs as `aten.addmm`, which the policy does not list: recomputed.
bool per_op_checkpoint_saves(const ModelSpec& m, std::size_t linear);

/// Activation bytes one block keeps under that policy, per micro-batch, on one rank: its input
/// (the checkpoint wrapper's; /t with sequence parallelism), the saved linears' outputs, the
/// fused attention's output and log-sum-exp (its `_save_list`), and with sequence parallelism
/// the outputs of the two reduce-scatters (also listed); everything else is recomputed.
double per_op_checkpoint_bytes(const ModelSpec& m, std::int64_t seq_len, std::int64_t micro_batch,
                               double bytes_per_element, ActivationLayout layout);

/// The FLOPs per token of the linears that policy runs again in backward, on one TP rank.
double per_op_recompute_flops_per_token(const ModelSpec& m, int tp);

/// Activation bytes one block keeps for backward, per micro-batch, on one rank, at 16-bit
/// precision (Korthikanti et al. 2022, table 2), with t = tp, a = heads, s' = s/cp the rank's
/// tokens, c = 1/t with sequence parallelism (the norms, dropout and residuals split too),
/// else 1:
///   selective recompute  s'·b·h·(10·c + 24/t)    (t = 1: 34·s·b·h)
///   no recomputation     the above + eager: 5·a·s²·b/t (softmax output, its dropout mask and
///                        output); flash: 4·a·s'·b/t (the fp32 log-sum-exp per head and row;
///                        FlashAttention keeps the output, already counted, and recomputes
///                        the scores in backward)
///   full recompute       2·c·s'·b·h (the block input only)
/// fp8 linear inputs (not with full recompute, whose input is a norm's) save half of the four
/// linear layers' saved inputs — QKV and MLP-in 2·c each, projection 2/t, MLP-out 8/t — i.e.
/// s'·b·h·(2·c + 5/t). fp32 training doubles the 16-bit terms (not the fp32 log-sum-exp).
/// A measured model: its blocks' mean measured bytes (selective recomputation keeps them all:
/// the attention core is not known), the block input (boundary) with full recomputation.
double activation_bytes_per_layer(const ModelSpec& m, std::int64_t seq_len,
                                  std::int64_t micro_batch, Recompute recompute,
                                  double bytes_per_element = 2.0, ActivationLayout layout = {});

/// Activation bytes the output unit keeps per micro-batch on one rank: the final norm's input
/// in the activation dtype (s'·b·h·e, /t with sequence parallelism) and the fp32 logits
/// cross-entropy keeps (4·s'·b·V; vocab-parallel with TP: 4·s'·b·V_padded/t), s' = s/cp.
double head_activation_bytes(const ModelSpec& m, std::int64_t seq_len, std::int64_t micro_batch,
                             double bytes_per_element = 2.0, ActivationLayout layout = {});

}  // namespace stratagem::scenario
