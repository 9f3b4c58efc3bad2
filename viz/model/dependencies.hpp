#pragma once
// Dependencies of the ops a result shows, for "click an op, see what it waits for". Spans
// carry op ids; the edges live in the plan, which a result does not store: the plan is the
// one the result was simulated from, or is rebuilt from the result's scenario (deterministic,
// folded like the result) and checked against every span before it is trusted.
#include <memory>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "viz/model/document.hpp"

namespace stratagem::viz {

class Dependencies {
 public:
  /// Indexes `plan` for `doc`. When a span's op is missing from the plan or differs in rank
  /// or kind, the index is empty and error() says which span.
  Dependencies(std::shared_ptr<const plan::StepPlan> plan, const Document& doc);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  /// What `op` waits for: its deps, and for a recv the send that feeds it.
  std::vector<plan::OpId> upstream(plan::OpId op) const;
  /// What waits for `op`: ops listing it as a dep, and for a send the recv it feeds.
  std::vector<plan::OpId> downstream(plan::OpId op) const;
  /// The other ranks' ops of the same collective instance.
  std::vector<plan::OpId> peers(plan::OpId op) const;

 private:
  std::shared_ptr<const plan::StepPlan> plan_;
  std::vector<std::uint32_t> rev_begin_;  ///< CSR of dependents: op → [begin, begin+1)
  std::vector<plan::OpId> rev_;
  std::string error_;
};

/// The plan of `doc`: the one it carries, else build_plan of its scenario, folded when the
/// result has folded ranks. Throws SpecError when the scenario cannot be built.
std::shared_ptr<const plan::StepPlan> plan_for(const Document& doc);

/// Marks for drawing, one byte per op id: 0 none, then the values below.
enum class Mark : std::uint8_t { none, selected, upstream, downstream, peer };
std::vector<Mark> mark_dependencies(const Dependencies& deps, std::size_t op_count,
                                    plan::OpId selected);

}  // namespace stratagem::viz
