#pragma once
// RunResult: what one executed training step produced, whoever executed it. The simulator
// (sim/) and the real runtime (engine/runtime) both fill it; the CLI prints it, the viewer
// draws it and the benchmarks compare two of them. It holds the scenario, per-rank spans
// (one per executed op), per-rank memory over time by tensor class, and the step metrics.
// Stored as a versioned JSON document ("format": "stratagem-result"); exports in export.hpp.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/plan.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::result {

inline constexpr const char* kFormatName = "stratagem-result";
/// Bump when a reader of the previous version would misread a document.
inline constexpr int kFormatVersion = 1;

/// What a span did: a compute phase, a collective kind, or a p2p direction.
enum class SpanKind : std::uint8_t {
  forward,
  backward,
  backward_input,
  backward_weight,
  recompute,
  optimizer,
  loss_scale_check,
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  all_to_all,
  send,
  recv
};
inline constexpr int kSpanKindCount = 14;
const char* to_string(SpanKind k);
SpanKind span_kind_of(const plan::Op& op);
bool is_compute(SpanKind k);
bool is_collective(SpanKind k);
bool is_p2p(SpanKind k);
/// forward, backward (all three kinds) and recompute: the work a pipeline bubble is measured on.
bool is_model_compute(SpanKind k);

struct Span;
/// Work a pipeline bubble is measured against: model compute, and the tensor- and expert-
/// parallel collectives that split it (they are part of a layer's work).
bool is_layer_work(const Span& s);

/// Bytes moved per step by purpose: the collective purposes, plus pipeline p2p.
enum class CommCategory : std::uint8_t {
  grad_sync,
  param_gather,
  tied_embedding,
  found_inf,
  pipeline,
  tensor_parallel,
  context_parallel,
  expert_parallel
};
inline constexpr int kCommCategoryCount = 8;
const char* to_string(CommCategory c);
/// The category a collective of this purpose counts in.
CommCategory comm_category(plan::CommPurpose p);

/// One executed op on one rank. Times in seconds from the start of the step.
struct Span {
  plan::OpId op = plan::kNoOp;
  SpanKind kind = SpanKind::forward;
  plan::Stream stream = plan::Stream::compute;
  plan::CommPurpose purpose = plan::CommPurpose::grad_sync;  ///< collectives only
  int stage = 0;
  int chunk = 0;
  int microbatch = -1;
  int unit_begin = 0, unit_end = 0;
  int peer = -1;     ///< p2p only
  double bytes = 0;  ///< HBM bytes (compute), buffer size S (collective), message (p2p)
  double flops = 0;
  double start_s = 0, end_s = 0;
};

/// The span of `op` from its payload (stage, chunk, micro-batch, units, bytes, FLOPs, peer),
/// executed from `start_s` to `end_s`. Both executors record spans through this.
Span span_of(const plan::StepPlan& plan, const plan::Op& op, double start_s, double end_s);

/// Memory of one rank: a sample whenever some class changes (the first at t = 0 holds the
/// resident bytes). Several samples may share a time when changes coincide.
struct MemoryTrack {
  std::vector<double> time_s;
  std::vector<std::array<double, plan::kTensorClassCount>> bytes;
  double total_at(std::size_t i) const;
};

struct RankResult {
  int rank = 0;
  /// Its mesh coordinate (scenario::MeshCoord: pipeline stage, data-, context- and
  /// tensor-parallel index) and node, as the plan laid it out.
  int stage = 0, dp = 0, node = 0;
  int tp = 0, cp = 0;
  int same_as = -1;  ///< ≥ 0: a folded replica identical to that rank (no spans, no samples)
  std::vector<Span> spans;  ///< sorted by (start_s, op)
  MemoryTrack memory;
  double peak_memory_bytes = 0;
  double capacity_bytes = 0;
  double host_bytes = 0;  ///< offloaded to CPU memory
  bool oom = false;
};

struct PeakFlops {
  double flops_per_s = 0;
  scenario::DType dtype = scenario::DType::fp32;
};

struct Metrics {
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;
  double mfu = 0;
  PeakFlops peak_flops;  ///< per GPU: what MFU divides by
  double bubble_fraction = 0;
  double exposed_comm_s = 0;
  /// Time per rank (mean) during which any communication runs; 1 − exposed/comm is the
  /// fraction of communication hidden behind compute.
  double comm_s = 0;
  std::array<double, kCommCategoryCount> comm_bytes{};  ///< summed over all ranks
  /// Real executor: per step, the mean loss over the whole global batch (empty for sim).
  std::vector<double> losses;
  /// Real executor: per step, rank 0's wall time, the first (warm-up) included (empty for sim).
  std::vector<double> step_times_s;
};

struct RunResult {
  scenario::Scenario scenario;
  std::string executor = "sim";  ///< "sim" or "real"
  std::string hardware;          ///< cost-model or machine profile name
  std::uint64_t events = 0;      ///< events the executor processed (sim)
  Metrics metrics;
  std::vector<RankResult> ranks;  ///< one per global rank

  /// The rank whose spans and samples describe `rank` (itself unless folded).
  const RankResult& resolved(int rank) const;
};

nlohmann::json to_json(const RunResult& r);
/// `source` names the document in error messages (a file path).
RunResult result_from_json(const nlohmann::json& j, const std::string& source = "result");
void save_result(const RunResult& r, const std::string& path);
/// Throws SpecError naming the file for unknown formats, newer versions and bad fields.
RunResult load_result(const std::string& path);

}  // namespace stratagem::result
