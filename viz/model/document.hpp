#pragma once
// A loaded run result, ready to draw: spans split into lanes (one per stream, plus extra
// lanes where spans on one stream overlap, as posted p2p ops do), per-rank busy time and
// bubble fraction, and the step's time range. Simulated and measured results load alike.
#include <memory>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"
#include "viz/model/mesh.hpp"

namespace stratagem::viz {

/// Spans of one rank that share a stream and never overlap: indices into
/// RankResult::spans, sorted by start (so also by end).
struct Lane {
  plan::Stream stream = plan::Stream::compute;
  int sub = 0;  ///< 0 for a stream's first lane; overlapping spans spill into 1, 2, ...
  std::vector<int> spans;
};

struct RankSummary {
  double model_busy_s = 0;     ///< union of forward/backward/recompute spans
  double bubble_fraction = 0;  ///< 1 − busy / (end of the last model compute on any rank)
  double end_s = 0;            ///< end of the rank's last span
};

class Document {
 public:
  /// `label` names the document in the UI (file stem, strategy name).
  Document(result::RunResult result, std::string label);
  /// Loads a result file (SpecError naming the file on bad input).
  static std::shared_ptr<Document> load(const std::string& path);

  const result::RunResult& result() const { return result_; }
  const std::string& label() const { return label_; }
  int world() const { return static_cast<int>(result_.ranks.size()); }
  /// Each rank's (stage, dp, tp, node) and the tensor-parallel groups.
  const Mesh& mesh() const { return mesh_; }

  /// The lanes of `rank` (those of the rank it is folded into, for a folded replica).
  const std::vector<Lane>& lanes(int rank) const;
  /// The spans of `rank` (resolved the same way).
  const std::vector<result::Span>& spans(int rank) const;
  const RankSummary& summary(int rank) const;
  /// Index of the rank whose spans `rank` shows (itself unless folded).
  int resolved_rank(int rank) const;

  /// End of the last span on any rank (≥ the recorded step time when spans run past it).
  double end_s() const { return end_s_; }
  /// Peak memory over ranks and whether any rank ran out of memory.
  double peak_memory_bytes() const { return peak_memory_bytes_; }
  bool any_oom() const { return any_oom_; }

  /// The plan the result executed, when known (set by whoever simulated it, or rebuilt
  /// from the result's scenario by dependencies.hpp).
  const std::shared_ptr<const plan::StepPlan>& plan() const { return plan_; }
  void set_plan(std::shared_ptr<const plan::StepPlan> p) { plan_ = std::move(p); }

 private:
  result::RunResult result_;
  std::string label_;
  Mesh mesh_;
  std::vector<std::vector<Lane>> lanes_;  ///< per rank; empty for folded replicas
  std::vector<RankSummary> summaries_;
  double end_s_ = 0;
  double peak_memory_bytes_ = 0;
  bool any_oom_ = false;
  std::shared_ptr<const plan::StepPlan> plan_;
};

/// Splits spans into lanes by stream, then greedily into the fewest non-overlapping lanes.
std::vector<Lane> make_lanes(const std::vector<result::Span>& spans);

}  // namespace stratagem::viz
