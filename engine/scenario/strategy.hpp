#pragma once
// How a model is trained on a cluster: parallelism, schedule, sharding, precision.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/scenario/cluster.hpp"
#include "engine/scenario/fp8_recipe.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/stack.hpp"

namespace stratagem::scenario {

/// Pipeline schedules (workload/schedule.hpp has each one's source). The zero-bubble ones
/// split each backward into its input gradient (B, on the critical path) and its weight
/// gradient (W, deferred into the bubbles), Qi et al., ICLR 2024, as PyTorch's
/// torch.distributed.pipelining runs them: `zb_h1` (ScheduleInterleavedZeroBubble with one
/// stage per rank: the paper's ZB-H1), `interleaved_zb` (the same with `chunks` stages per
/// rank, looped), `zbv` (ScheduleZBVZeroBubble: two stages per rank in a V), `dualpipev`
/// (ScheduleDualPipeV, DeepSeek's DualPipe folded into a V: pairs of one micro-batch's forward
/// and another's whole backward in the steady state, B/W split at the ends).
enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, interleaved_zb, zbv, dualpipev };
/// The schedule splits backward into input- and weight-gradient passes (some of them).
inline bool splits_backward(Schedule s) {
  return s == Schedule::zb_h1 || s == Schedule::interleaved_zb || s == Schedule::zbv ||
         s == Schedule::dualpipev;
}
/// Two chunks per rank in a V: rank r runs virtual stages r and 2·pp − 1 − r.
inline bool v_shape(Schedule s) {
  return s == Schedule::zbv || s == Schedule::dualpipev;
}
/// Schedule items per (chunk, micro-batch): forward and backward, or forward, B and W.
inline int items_per_microbatch(Schedule s) {
  return splits_backward(s) ? 3 : 2;
}
/// The schedule runs several model chunks (virtual stages) per rank.
inline bool multi_chunk(Schedule s) {
  return s == Schedule::interleaved || s == Schedule::interleaved_zb || v_shape(s);
}
/// ZeRO stages and FSDP sharding strategies. FSDP's NO_SHARD is `none` (DDP).
enum class Sharding {
  none,
  zero1,
  zero2,
  zero3,
  fsdp_full_shard,
  fsdp_shard_grad_op,
  fsdp_hybrid_shard
};
/// fp8: Transformer Engine / torchao float8 — the blocks' linear layers in fp8 (E4M3), the
/// rest (attention core, norms, LM head, communication) in bf16, states as with bf16.
enum class Precision { no, fp16, bf16, fp8 };
/// The attention core's kernel: `flash` (FlashAttention-2 / PyTorch SDPA: fused, keeps only the
/// output and a log-sum-exp per row, backward recomputes the scores) or `eager` (softmax(QKᵀ)V
/// as separate kernels keeping the s×s scores, Korthikanti et al. 2022).
enum class Attention { flash, eager };
/// Which fused attention kernel `flash` runs: FlashAttention-2 (`fa2`, also PyTorch SDPA's
/// flash backend), FlashAttention-1 (`fa1`), the FA1-era Triton kernel (`triton`: flash_attn
/// _triton.py, MPT / llm-foundry's attn_impl triton until 2024) or cuDNN's fused attention
/// (`cudnn`: Transformer Engine's FusedAttention, its first choice on Hopper and Blackwell, and
/// PyTorch SDPA's cuDNN backend). Each has its own efficiency by head dimension, causality and
/// sequence length in the GPU presets (attention_kernels).
enum class AttentionKernel { fa2, fa1, triton, cudnn };
const char* to_string(AttentionKernel k);
enum class Optimizer { adam, adamw, sgd };
enum class Offload { none, cpu };

const char* to_string(Schedule s);
const char* to_string(Sharding s);
const char* to_string(Precision p);
const char* to_string(Optimizer o);
const char* to_string(Recompute r);
const char* to_string(Attention a);

/// Parses the names the scenario format and the CLI accept (zero2, FULL_SHARD, ddp, ...).
Sharding parse_sharding(const std::string& name, const std::string& path);

bool shards_optimizer(Sharding s);   ///< ZeRO-1 and up, every FSDP sharding
bool shards_gradients(Sharding s);   ///< ZeRO-2 and up, every FSDP sharding
bool shards_parameters(Sharding s);  ///< ZeRO-3, FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD
/// ZeRO-3 / FULL_SHARD / HYBRID_SHARD free gathered parameters after each unit's forward and
/// gather again for backward; SHARD_GRAD_OP keeps them from forward to backward.
bool reshards_after_forward(Sharding s);

/// DeepSpeed's dynamic loss-scale keys (fp16 only).
struct LossScaleSpec {
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  double min_loss_scale = 1;
};

/// The most micro-batches per optimizer step (per pipeline) a scenario may have, given or
/// derived from the global batch: each is a forward and a backward of every unit in the plan.
inline constexpr int kMaxMicroBatches = 1 << 16;

/// How an MoE block moves its tokens to the experts' ranks and back (Megatron-Core's
/// moe_token_dispatcher_type): alltoall — each rank sends each routed token copy to the rank
/// holding its expert and receives them back; allgather — the expert-parallel group gathers
/// every token and each rank keeps those of its experts, the combine a reduce-scatter.
enum class MoeDispatcher { alltoall, allgather };
const char* to_string(MoeDispatcher d);

struct StrategySpec {
  int dp = 1;
  int pp = 1;
  int tp = 1;                      ///< tensor-parallel degree (Megatron-LM)
  bool sequence_parallel = false;  ///< Megatron-LM sequence parallelism (needs tp > 1)
  int cp = 1;  ///< context-parallel degree (Megatron-LM CP / torchtitan ring attention)
  /// Expert parallelism of a mixture-of-experts model (expert_mesh.hpp): each MoE block's
  /// experts split over ep ranks, each expert's MLP over etp ranks (Megatron-Core's
  /// expert_model_parallel_size and expert_tensor_parallel_size).
  int ep = 1;
  int etp = 1;
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  /// Tokens of the busiest expert over the mean (1: balanced, as Megatron-Bridge's
  /// forced-balance benchmarks; at most experts / top_k, every token on the same experts).
  double moe_load_imbalance = 1.0;
  Attention attention = Attention::flash;
  AttentionKernel attention_kernel = AttentionKernel::fa2;
  Schedule schedule = Schedule::one_f_one_b;
  int chunks = 1;  ///< virtual stages per rank (interleaved, interleaved-zb; zbv: 2)
  /// Megatron-LM's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split:
  /// the embedding (the LM head and loss) counts as one transformer layer when the layers are
  /// divided over the (virtual) pipeline stages, so the first (last) stage holds one block fewer.
  bool embedding_as_layer = false;
  bool loss_as_layer = false;
  /// Layer-equivalents the pipeline split divides: the blocks plus the counted embedding and loss.
  std::int64_t split_layers(std::int64_t blocks) const {
    return blocks + (embedding_as_layer ? 1 : 0) + (loss_as_layer ? 1 : 0);
  }
  /// The embedding and the LM head run on different pipeline ranks: pp > 1 but a V, which
  /// puts both on rank 0. A tied model's head then keeps its own copy of the word table and
  /// syncs its gradient with the first stage (Megatron).
  bool ends_apart() const { return pp > 1 && !v_shape(schedule); }
  int micro_batch_size = 1;
  int grad_accum = 1;  ///< micro-batches per optimizer step per pipeline
  Sharding sharding = Sharding::none;
  Precision precision = Precision::no;
  bool tf32 = false;            ///< fp32 training with GEMMs on the tf32 tensor cores
  bool fp8_all_gather = false;  ///< FSDP under fp8 gathers the linear weights in fp8 (torchao)
  LossScaleSpec loss_scale;
  Recompute recompute = Recompute::none;
  double bucket_mb = 25;  ///< DDP bucket_cap_mb (MiB)
  Optimizer optimizer = Optimizer::adamw;
  bool master_weights = true;  ///< fp32 master copy under fp16/bf16 (bf16 may turn it off)
  Offload offload_optimizer = Offload::none;
  int prefetch = 1;  ///< ZeRO-3/FSDP: units whose gather may run ahead
  /// The framework whose code launches the kernels (stack.hpp); `compile`: torch.compile
  /// (Inductor) over the eager stack's modules.
  Stack stack = Stack::pytorch;
  bool compile = false;
  /// fp8 training: how GEMM operands are scaled (fp8_recipe.hpp).
  Fp8Recipe fp8_recipe = Fp8Recipe::tensorwise;
  /// Tensor parallelism's all-gathers and reduce-scatters decomposed and run beside the GEMMs
  /// that consume or produce them: PyTorch's async TP (SymmetricMemory, torchtitan's
  /// enable_async_tensor_parallel under torch.compile), Megatron-Core's tp_comm_overlap
  /// (Transformer Engine userbuffers). Needs tp > 1 with sequence parallelism.
  bool async_tp = false;
};

struct TrainingSpec {
  std::int64_t seq_len = 1024;
  std::int64_t global_batch = 0;
  int steps = 1;
  std::uint64_t seed = 1234;
};

/// Why the strategy's stack keys cannot hold together: torch.compile on a stack that does not
/// run eager modules (`key` "compile"), fp8 on megatron-legacy ("stack"), an fp8 recipe
/// without fp8 training or on a stack that has no such recipe ("fp8_recipe"), async TP
/// without sequence-parallel TP or on a stack that has none ("async_tp"). Empty (false)
/// when they hold. Parsing and `validate` refuse with it; whether the GPU runs the recipe is
/// checked by the overload that takes the GPU (validate's).
struct StackRefusal {
  std::string key;
  std::string reason;
  explicit operator bool() const { return !reason.empty(); }
};
StackRefusal stack_refusal(const StrategySpec& s);
/// The same, and whether `gpu` runs the fp8 recipe (mxfp8 needs GpuSpec::mx_formats).
StackRefusal stack_refusal(const StrategySpec& s, const GpuSpec& gpu);
/// The command line's stack flags: `--stack NAME`, `--compile`, `--fp8_recipe NAME` (empty:
/// keep the scenario's).
struct StackFlags {
  std::string stack;
  bool compile = false;
  std::string fp8_recipe;
};
/// Applies `flags` to `s` and checks the result as parsing does: a refusal names the flag that
/// caused it (`--compile`, `--fp8_recipe`, `--stack`), else the scenario's key.
void apply_stack_flags(StrategySpec& s, const StackFlags& flags, const GpuSpec& gpu);
/// The stack as commands print it: "megatron", "pytorch + torch.compile", "pytorch, fp8
/// rowwise" (the recipe where it is not the default).
std::string stack_text(const StrategySpec& s);

/// Parses the strategy; cross-checks against model, cluster and training are in scenario.
StrategySpec parse_strategy(const nlohmann::json& object, const std::string& path);

/// Bytes per element of parameters and gradients as the model computes with them.
double compute_param_bytes(Precision p);
/// The dtype activations, 16-bit parameters and their communication use (fp8 training: bf16).
DType compute_dtype(Precision p);
/// The dtype the blocks' linear layers multiply in: fp8 under fp8 training, tf32 for fp32
/// training with `tf32`, else compute_dtype.
DType gemm_dtype(const StrategySpec& s);
/// The recomputation that takes effect: selective recomputation (the attention core) with
/// flash attention saves nothing — the fused kernel keeps no s×s tensors — so it is none.
Recompute effective_recompute(const StrategySpec& s);
/// Optimizer-state bytes per parameter, fp32 master copy excluded: Adam 8 (momentum and
/// variance in fp32), SGD with momentum 4.
double optimizer_state_bytes_per_param(Optimizer o);
/// Whether training keeps an fp32 master copy of the parameters: fp16 and bf16 do unless
/// `master_weights` is false (pure bf16); fp32 training does not need one.
bool has_master_weights(const StrategySpec& s);
/// The ZeRO paper's K: optimizer bytes per parameter including the master copy
/// (mixed-precision Adam: 12; fp32 Adam: 8; SGD with momentum: 8 mixed, 4 fp32).
double zero_k(const StrategySpec& s);

nlohmann::json to_json(const StrategySpec& s);

}  // namespace stratagem::scenario
