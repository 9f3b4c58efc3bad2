#pragma once
// Strategy search: enumerate dp×tp×cp×pp (tp over the divisors of gpus_per_node, or of the
// NVLink domain, with and without sequence parallelism; cp for long sequences), schedule,
// micro-batch size and count, sharding, precision (fp8 where the GPU has it) and
// recomputation, and the attention kernel when asked, for a model on a cluster; drop what does not
// fit (analytic memory model first, then the simulated peak), simulate the rest and rank by
// throughput.
#include <functional>
#include <string>
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"

namespace stratagem::tune {

struct SearchOptions {
  std::vector<scenario::Precision> precisions = {
      scenario::Precision::bf16, scenario::Precision::fp16, scenario::Precision::no};
  /// Adds fp8 to `precisions` when the GPU has an fp8 peak (and `precisions` lacks it).
  bool fp8_when_available = true;
  /// The attention kernels to try: flash only unless asked (eager is what old stacks ran).
  std::vector<scenario::Attention> attentions = {scenario::Attention::flash};
  /// Context parallelism (cp = 2, 4, … over the ranks of a TP index) is tried from this
  /// sequence length on (shorter sequences gain nothing from splitting); 0: never.
  std::int64_t context_parallel_from_seq_len = 16384;
  /// selective-op (torchtitan's per-op checkpointing) is tried under the pytorch stack only.
  std::vector<scenario::Recompute> recomputes = {
      scenario::Recompute::none, scenario::Recompute::selective, scenario::Recompute::selective_op,
      scenario::Recompute::full};
  int max_micro_batch_size = 64;
  int max_pp = 64;
  /// Branch and bound: simulate in order of an upper bound on throughput (from the compute
  /// lower bound of each plan) and skip configurations that can reach neither the best
  /// `keep_top` nor the Pareto front. The best keep_top and the front are exactly those of
  /// simulating everything. 0: simulate every configuration that fits.
  int keep_top = 10;
  /// Simulations run this many at a time (0: one per hardware thread). The result is the
  /// sequential one exactly: a configuration simulated alongside another that, had it run
  /// first, would have pruned it is dropped again (counted as pruned, not simulated).
  int threads = 0;
};

struct Candidate {
  scenario::Scenario scenario;
  std::string label;  ///< "dp 4 × tp 2 SP × pp 2, 1f1b, mbs 2 × 16, zero1, bf16, recompute none"
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double exposed_comm_s = 0;
  double peak_memory_bytes = 0;  ///< largest over ranks (simulated)
};

struct SearchResult {
  int enumerated = 0;       ///< configurations generated
  int invalid = 0;          ///< rejected by validation (e.g. ZeRO-2 with pp > 1)
  int memory_rejected = 0;  ///< did not fit the GPU (analytic or simulated peak)
  int simulated = 0;
  int pruned = 0;  ///< fit, but provably outside the best keep_top and the Pareto front
  std::vector<Candidate> ranked;  ///< fitting configurations, best throughput first
  std::vector<int> pareto;        ///< indices into `ranked`: throughput vs peak memory front
};

/// A lower bound on the simulated step time of `scenario` under `models`, without building its
/// plan (search.cpp says why it holds); 0 when there is none (measured compute models).
double step_time_lower_bound(const scenario::Scenario& scenario, const sim::CostModels& models);

/// One line describing a scenario's strategy (used as the label).
std::string strategy_label(const scenario::Scenario& s);

/// Searches strategies for `base`'s model, cluster and training (its strategy is ignored).
/// `progress(done, total)` is called as configurations are evaluated.
SearchResult search(const scenario::Scenario& base, const SearchOptions& options,
                    const std::function<void(int, int)>& progress = {});

}  // namespace stratagem::tune
