#pragma once
// Analytic memory model: what each rank of a scenario holds at its peak, per tensor class, in
// bytes, against the GPU's capacity. It follows the "Memory contract" of docs/architecture.md
// (the plan builder allocates the same, so the simulated peak of a plan agrees with it):
//   peak = model states and loss scale (resident for the step, model_states.hpp)
//        + the largest sum of activations, gathered parameters and gradient buckets over the
//          stage's schedule (transient.hpp).
// Ranks of one pipeline stage hold the same (data-parallel replicas; tensor-parallel ranks hold
// equal shards; HYBRID_SHARD shards the same way in every node), so the model computes one
// RankMemory per stage and copies it to the stage's ranks. No plan is built: cost O(layers + micro-batches · pp · chunks).
#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/memory/model_states.hpp"
#include "engine/plan/plan.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::memory {

/// One rank at its peak. `bytes` are GPU bytes per class (plan::TensorClass) at the peak
/// moment: resident classes for the whole step, transient ones as live at the peak.
struct RankMemory {
  int rank = 0;
  int stage = 0;
  int dp_index = 0;
  int tp_index = 0;
  int cp_index = 0;
  std::array<double, plan::kTensorClassCount> bytes{};
  double host_bytes = 0;          ///< offloaded to CPU memory (optimizer + master weights)
  double model_states_bytes = 0;  ///< params + grads + optimizer + master weights on the GPU
  double peak_bytes = 0;          ///< sum of `bytes`
  double capacity_bytes = 0;      ///< the GPU's memory (cluster.gpu.memory_bytes)
  bool fits = true;               ///< peak_bytes <= capacity_bytes
  double stage_params = 0;        ///< Ψ: parameters of the units this stage runs (one TP rank's)
  int shards = 1;                 ///< N: ranks sharing the stage's sharded states
  int max_in_flight = 0;          ///< most chunk-micro-batches holding activations at once

  double at(plan::TensorClass c) const { return bytes[static_cast<int>(c)]; }
  double headroom_bytes() const { return capacity_bytes - peak_bytes; }
};

struct MemoryReport {
  std::string scenario_name;
  std::string gpu_name;
  double capacity_bytes = 0;
  int dp = 1, pp = 1, tp = 1, cp = 1;
  std::vector<RankMemory> stages;  ///< one per pipeline stage (rank: the stage's first)
  std::vector<RankMemory> ranks;   ///< every rank, rank = (stage · dp + dp index) · tp + tp index
  bool fits = true;                ///< every rank fits
  int worst_stage = 0;             ///< the stage with the largest peak (the first if tied)

  const RankMemory& worst() const { return stages[worst_stage]; }
};

/// The memory of every rank of a valid scenario (as scenario::validate leaves it).
MemoryReport estimate_memory(const scenario::Scenario& scenario);

/// Every rank of the scenario from its per-stage entries (rank = (stage · dp + dp index) · tp
/// + tp index, as plan::Layout numbers them).
std::vector<RankMemory> expand_to_ranks(const std::vector<RankMemory>& stages, int dp, int tp = 1,
                                        int cp = 1);

/// {"name", "gpu", "capacity_bytes", "fits", ..., "ranks": [{"rank", "stage", "classes": {...},
/// "host_bytes", "model_states_bytes", "peak_bytes", "capacity_bytes", "headroom_bytes",
/// "fits", ...}], "stages": [...]}; bytes as numbers, keys in this order.
nlohmann::ordered_json to_json(const RankMemory& rank);
nlohmann::ordered_json to_json(const MemoryReport& report);

}  // namespace stratagem::memory
