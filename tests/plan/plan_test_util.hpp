#pragma once
// Scenario construction for plan tests: a small GPT on an 8-GPU node, edited per test.
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/plan/plan.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::test {

/// A 16-layer GPT (h 1024) on one 8×A100-80GB node with the given strategy keys.
inline scenario::Scenario small_scenario(const nlohmann::json& strategy, int gpus = 8) {
  nlohmann::json j = {{"name", "test"},
                      {"model",
                       {{"layers", 16},
                        {"hidden", 1024},
                        {"heads", 16},
                        {"vocab", 32000},
                        {"max_positions", 2048}}},
                      {"cluster",
                       {{"gpus_per_node", gpus},
                        {"gpu", "a100-80gb"},
                        {"intra_node", {{"bandwidth_GBps", 300}, {"latency_us", 3}}}}},
                      {"strategy", strategy},
                      {"training", {{"seq_len", 1024}}}};
  return scenario::parse_scenario(j);
}

/// The plan's group of that label ("tp(stage 0, dp 1)"); a test failure when there is none.
inline const plan::Group& group_named(const plan::StepPlan& p, const std::string& label) {
  for (const auto& g : p.groups) {
    if (g.label == label) return g;
  }
  ADD_FAILURE() << "no group " << label;
  static plan::Group none;
  return none;
}

/// Bytes one rank puts on the wire for its collectives (ring algorithms):
/// all-reduce 2(n−1)/n·S, reduce-scatter and all-gather (n−1)/n·S.
inline double wire_bytes(const plan::StepPlan& p, int rank) {
  double total = 0;
  for (const auto& op : p.ops) {
    if (op.rank != rank) continue;
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c) continue;
    const double n = static_cast<double>(p.groups[c->group].ranks.size());
    const double f = c->kind == plan::CollectiveKind::all_reduce ? 2.0 * (n - 1) / n : (n - 1) / n;
    total += f * c->bytes;
  }
  return total;
}

}  // namespace stratagem::test
