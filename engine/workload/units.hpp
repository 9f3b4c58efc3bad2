#pragma once
// The model's units (embedding, each transformer block, the head) with one rank's parameters,
// FLOPs and activation bytes per micro-batch, and the work of a phase over a range of them.
// Units are the granularity of compute ops, parameter sharding (ZeRO-3/FSDP wrap one unit
// each) and pipeline splits.
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "engine/workload/work.hpp"

namespace stratagem::workload {

/// The fused attention kernel's backward FLOPs over its forward's: 2.5 (FlashAttention-2,
/// Dao 2023: backward recomputes the scores, five s×s matmuls against the forward's two).
inline constexpr double kFlashBackwardRatio = 2.5;

/// The model's units with parameters, FLOPs and activation bytes per micro-batch.
std::vector<Unit> make_units(const scenario::Scenario& scenario);
/// The work of phase `phase` over units [u0, u1) as one compute op (no stage, chunk or
/// micro-batch): GEMM FLOPs (the LM head's in 16 bits under fp8), fused-attention FLOPs
/// (kFlashBackwardRatio in backward), memory-bound bytes, launches.
Compute units_work(const scenario::StrategySpec& st, const std::vector<Unit>& units, Phase phase,
                   int u0, int u1);

}  // namespace stratagem::workload
