#pragma once
// Model states of one rank: parameters, gradients, optimizer states and fp32 master weights,
// as the ZeRO paper counts them (Rajbhandari et al. 2020, section 3.1 and figure 1), plus the
// fp16 loss-scale state. These are the bytes a rank holds for the whole step; the plan builder
// allocates exactly these as `RankInfo::initial` (docs/architecture.md, "Memory contract").
//
// With Ψ parameters, N ranks sharing the states, c compute bytes per element, K_s optimizer
// bytes per parameter and a 4-byte master copy under mixed precision:
//   params          c·Ψ,      c·Ψ/N when parameters are sharded (ZeRO-3, FSDP)
//   grads           c·Ψ,      c·Ψ/N when gradients are sharded (ZeRO-2+, FSDP)
//   optimizer       K_s·Ψ,    K_s·Ψ/N when the optimizer is sharded (ZeRO-1+, FSDP)
//   master_weights  4·Ψ,      4·Ψ/N likewise; none for fp32 or pure bf16
// Mixed-precision Adam (K = K_s + 4 = 12) gives (2+2+K)Ψ, 2Ψ+2Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, (2+2+K)Ψ/N.
// With `offload_optimizer: cpu` the optimizer states and master weights live in host memory.
#include "engine/scenario/scenario.hpp"

namespace stratagem::memory {

/// fp16 dynamic loss scaling keeps the scale (fp32) and a found-inf flag (fp32) on the GPU.
inline constexpr double kLossScaleBytes = 8.0;
/// fp32 master copy of each parameter under mixed precision.
inline constexpr double kMasterBytesPerParam = 4.0;

struct ModelStates {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;       ///< on the GPU (0 when offloaded)
  double master_weights_bytes = 0;  ///< on the GPU (0 when offloaded)
  double loss_scale_bytes = 0;
  double host_bytes = 0;  ///< optimizer states + master weights offloaded to CPU memory

  /// The ZeRO paper's "model states" on the GPU: params + grads + optimizer + master.
  double gpu_bytes() const {
    return params_bytes + grads_bytes + optimizer_bytes + master_weights_bytes;
  }
  /// Adds the states of parameters sharded over another group (an MoE stage's routed experts);
  /// the loss scale is the rank's, counted once.
  void add(const ModelStates& more) {
    params_bytes += more.params_bytes;
    grads_bytes += more.grads_bytes;
    optimizer_bytes += more.optimizer_bytes;
    master_weights_bytes += more.master_weights_bytes;
    host_bytes += more.host_bytes;
  }
};

/// Model states of one rank holding `params` (Ψ) shared by `shards` (N) ranks, sharded as
/// `strategy.sharding` says, with the strategy's precision, optimizer and offload.
ModelStates model_states(double params, int shards, const scenario::StrategySpec& strategy);

/// The quick form: ZeRO stage 0..3 in place of the strategy's sharding. Throws SpecError
/// (path "--zero") for any other stage.
ModelStates zero_model_states(double params, int shards, int zero_stage,
                              const scenario::StrategySpec& strategy);

/// The sharding stage a ZeRO stage number means (0 none, 1, 2, 3); throws SpecError otherwise.
scenario::Sharding sharding_of_zero_stage(int zero_stage);

/// N: the ranks that share a stage's sharded states. The data-parallel group (dp), or its
/// members inside one node for HYBRID_SHARD (gpus_per_node / tp: shard inside the node,
/// replicate across nodes).
int shard_group_size(const scenario::Scenario& scenario);

}  // namespace stratagem::memory
