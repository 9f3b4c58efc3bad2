#pragma once
// A scenario: model + cluster + strategy + training, parsed once and validated as a whole.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/cluster.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/strategy.hpp"

namespace stratagem::scenario {

struct Scenario {
  std::string name;
  std::string source;  ///< file or shipped name it came from ("" when built in code)
  ModelSpec model;
  ClusterSpec cluster;
  StrategySpec strategy;
  TrainingSpec training;
  /// Keys the input sets that are legal but do nothing in this scenario, one line each
  /// ("strategy.prefetch: ..."), for the commands to print as warnings. Not part of the
  /// scenario's JSON.
  std::vector<std::string> warnings;

  int world_size() const { return strategy.dp * strategy.tp * strategy.cp * strategy.pp; }
  /// Micro-batches per optimizer step per pipeline (== grad_accum).
  int micro_batches() const { return strategy.grad_accum; }
  std::int64_t tokens_per_step() const { return training.global_batch * training.seq_len; }
};

/// Parses and validates a scenario object. `source` prefixes nothing; paths are JSON paths.
Scenario parse_scenario(const nlohmann::json& object, const std::string& source = "");
/// Loads a scenario from a file, or from a shipped scenario when no such file exists
/// ("default", "zero3-gpt2-xl-8xa100", ...).
Scenario load_scenario(const std::string& file_or_name);
/// load_scenario for a scenario that is only described (`stratagem info`), not planned: its model
/// may have features the planner does not model yet (unsimulated_feature), every other rule holds.
Scenario load_scenario_to_describe(const std::string& file_or_name);
Scenario parse_scenario_to_describe(const nlohmann::json& object, const std::string& source = "");
/// Checks the cross-field rules (world size, pipeline split, batch arithmetic, ...) and that the
/// model has no feature the planner does not model (unsimulated_feature: a SpecError naming its
/// key). parse_scenario calls it; code that edits a Scenario calls it again.
void validate(Scenario& s);

/// The scenario as JSON in the input format (presets expanded), re-parseable.
nlohmann::json to_json(const Scenario& s);
nlohmann::json to_json(const ModelSpec& m);

}  // namespace stratagem::scenario
