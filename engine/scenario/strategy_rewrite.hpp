#pragma once
// The rules that keep a strategy consistent when one of its choices changes (a parallel
// degree, the micro-batch size, the sharding, the precision), written once for the tools
// that rewrite strategies: search's candidates, compare's variants and the viewer's what-if.
//  * The global batch is what training fixes: a new data-parallel degree or micro-batch size
//    re-derives the micro-batches per step (Megatron-LM's num_microbatches = global batch /
//    (micro batch × dp)); the what-if, which sets the micro-batches, derives the global batch.
//  * Megatron-LM runs tensor parallelism with sequence parallelism wherever the sequence splits
//    over the group; sequence parallelism needs tp ≥ 2.
//  * torchao's float8 all-gather (torchtitan's default with fp8) needs fp8 and parameters that
//    FSDP/ZeRO-3 gathers.
//  * CPU optimizer offload (ZeRO-Offload) needs a sharded optimizer.
#include <cstdint>
#include <optional>

#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {

/// Micro-batches per step that keep `global_batch` with `micro_batch_size` × `dp` samples per
/// micro-batch; nullopt when they do not divide it.
std::optional<std::int64_t> grad_accum_for(std::int64_t global_batch, int micro_batch_size, int dp);
/// The same, or SpecError("training.global_batch", …) when they do not divide it.
std::int64_t require_grad_accum(std::int64_t global_batch, int micro_batch_size, int dp);
/// The global batch of `micro_batches` micro-batches of `micro_batch_size` on `dp` replicas.
std::int64_t global_batch_of(int micro_batch_size, int micro_batches, int dp);

/// Whether sequence parallelism can run with `tp`.
bool sequence_parallel_allowed(int tp);
/// Megatron-LM's choice for a new tensor-parallel degree: on wherever the sequence splits.
bool default_sequence_parallel(int tp, std::int64_t seq_len);

/// Whether the float8 all-gather can run: fp8 training with parameters gathered.
bool fp8_all_gather_allowed(Precision precision, Sharding sharding);
/// Whether async TP can run with the strategy's tensor parallelism and stack (stack_refusal's
/// rule): rewrites that change tp or sequence parallelism keep `async_tp` only where it holds.
bool async_tp_allowed(const StrategySpec& s);
/// Whether the optimizer can be offloaded to the CPU under `sharding`.
bool optimizer_offload_allowed(Sharding sharding);

}  // namespace stratagem::scenario
