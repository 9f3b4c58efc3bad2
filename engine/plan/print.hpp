#pragma once
// Human- and machine-readable views of a plan's ops (`stratagem plan`).
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/plan/plan.hpp"

namespace stratagem::plan {

/// One line: "#12 compute forward stage 0 mb 3 units [1,5) 1.2 GFLOP deps #8,#11".
std::string describe(const StepPlan& plan, const Op& op);
/// A short kind label: "forward", "all_reduce", "send", ...
std::string kind_label(const Op& op);
/// Prints the layout summary and one rank's ops, stream by stream.
void print_rank(std::ostream& out, const StepPlan& plan, int rank);
/// One rank's ops as JSON (id, stream, kind, stage, chunk, microbatch, units, bytes, flops,
/// deps, memory effects, group/peer).
nlohmann::json rank_to_json(const StepPlan& plan, int rank);

}  // namespace stratagem::plan
