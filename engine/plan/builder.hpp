#pragma once
// Builds the StepPlan of a scenario: layout → schedule → data-parallel sync → parameter
// gathering → precision → accumulation → optimizer. See plan.hpp for the contract.
#include "engine/plan/plan.hpp"

namespace stratagem::plan {

struct BuildOptions {
  /// Build only data-parallel index 0 of each stage; the other replicas are identical in
  /// ops and timing (their collectives still span the full groups). Exact for every
  /// strategy this builder emits, since replicas of one stage run the same ops.
  bool fold = true;
};

/// The most ops a plan may hold (about 4 GiB with the simulator's per-op state).
inline constexpr double kMaxPlanOps = 20e6;

/// Throws SpecError (path "strategy.…") for combinations the builders cannot express, and for
/// plans estimated beyond kMaxPlanOps ops.
StepPlan build_plan(const spec::Scenario& scenario, const BuildOptions& options = {});

/// The per-stage order of (forward/backward, chunk, micro-batch) work for a schedule, as
/// Megatron-LM runs it. Exposed for the memory model and tests.
struct ScheduleItem {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
};
std::vector<ScheduleItem> schedule_order(spec::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches);

/// The fused attention kernel's backward FLOPs over its forward's: 2.5 (FlashAttention-2,
/// Dao 2023: backward recomputes the scores, five s×s matmuls against the forward's two).
inline constexpr double kFlashBackwardRatio = 2.5;

/// The model's units with parameters, FLOPs and activation bytes per micro-batch.
std::vector<Unit> make_units(const spec::Scenario& scenario);
/// The work of phase `phase` over units [u0, u1) as one compute op (no stage, chunk or
/// micro-batch): GEMM FLOPs (the LM head's in 16 bits under fp8), fused-attention FLOPs
/// (kFlashBackwardRatio in backward), memory-bound bytes, launches (schedule_pass.cpp).
Compute units_work(const spec::StrategySpec& st, const std::vector<Unit>& units, Phase phase,
                   int u0, int u1);
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
double gather_bytes(const spec::StrategySpec& st, const Unit& u);
/// Bytes a gathered unit holds while in use: the gather, plus under fp8 without the fp8
/// all-gather the fp8 weights and transposes it is cast to.
double gathered_bytes(const spec::StrategySpec& st, const Unit& u);
/// A stage's resident fp8 state: with unsharded parameters the fp8 weights and transposes,
/// always the scaling state of each fp8 linear layer (0 unless mixed_precision is fp8).
double fp8_resident_bytes(const spec::StrategySpec& st, const std::vector<Unit>& units,
                          const std::vector<std::pair<int, int>>& chunks);
/// Splits units 0..L+1 over pp·chunks virtual stages (embedding with the first, head with
/// the last; blocks as even as possible, earlier stages take the remainder). With
/// `embedding_as_layer` (`loss_as_layer`) the embedding (head and loss) counts as one layer of
/// the division, as Megatron-LM's account_for_embedding/loss_in_pipeline_split: L + 2 layers
/// over 64 virtual stages puts one block with the embedding and one with the head.
std::vector<std::vector<std::pair<int, int>>> split_stages(int layers, int pp, int chunks,
                                                          bool embedding_as_layer = false,
                                                          bool loss_as_layer = false);
/// The scenario's split: its pp, chunks and counted ends.
std::vector<std::vector<std::pair<int, int>>> split_stages(std::int64_t layers,
                                                          const spec::StrategySpec& st);

}  // namespace stratagem::plan
