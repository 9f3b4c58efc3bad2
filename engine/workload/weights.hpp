#pragma once
// What a unit's weights take beyond the parameters in the compute dtype: the bytes an
// FSDP/ZeRO-3 gather moves and holds, and fp8 training's weight copies and scaling state.
#include <utility>
#include <vector>

#include "engine/scenario/strategy.hpp"
#include "engine/workload/work.hpp"

namespace stratagem::workload {

/// fp8 training as Transformer Engine does it: each linear layer keeps its weight in fp8 and
/// its transpose for the backward GEMM (2 bytes per parameter), and delayed scaling keeps an
/// amax history of 1024 steps plus scale and inverse scale (fp32) for its input, weight and
/// output gradient; a block has four fp8 linear modules (fused QKV, projection, MLP in, MLP
/// out).
inline constexpr double kFp8CopyBytesPerParam = 2;
inline constexpr double kFp8AmaxHistory = 1024;
inline constexpr double kFp8TensorsPerLinear = 3;
inline constexpr double kFp8LinearsPerBlock = 4;
/// Bytes an FSDP/ZeRO-3 gather of the unit moves: its gathered parameters in the compute
/// dtype, or with fp8_all_gather its linear weights in fp8 (torchao's float8 all-gather).
double gather_bytes(const scenario::StrategySpec& st, const Unit& u);
/// Bytes a gathered unit holds while in use: the gather, plus under fp8 without the fp8
/// all-gather the fp8 weights and transposes it is cast to.
double gathered_bytes(const scenario::StrategySpec& st, const Unit& u);
/// A stage's resident fp8 state: with unsharded parameters the fp8 weights and transposes,
/// always the scaling state of each fp8 linear layer (0 unless mixed_precision is fp8).
double fp8_resident_bytes(const scenario::StrategySpec& st, const std::vector<Unit>& units,
                          const std::vector<std::pair<int, int>>& chunks);

}  // namespace stratagem::workload
