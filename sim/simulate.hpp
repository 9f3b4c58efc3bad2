#pragma once
// One way to simulate a scenario: its cost models, its plan, the simulator's run. Every tool
// that predicts a scenario (sim, compare, validate, search, the measured fit, the viewer,
// the benchmarks) goes through here, so what "simulated" means is written once.
#include "engine/plan/builder.hpp"
#include "engine/result/result.hpp"
#include "sim/cost_models.hpp"

namespace stratagem::sim {

struct SimulateOptions {
  plan::BuildOptions build;  ///< fold the data-parallel replicas (the default) or not
  CostOptions cost;
};

/// A simulated scenario with the plan it ran and the wall-clock time of each part.
struct Simulation {
  plan::StepPlan plan;
  result::RunResult result;
  double build_s = 0;     ///< building the plan
  double simulate_s = 0;  ///< running it
};

/// Makes the cost models (their errors first), builds the plan, runs it. Throws SpecError
/// for a scenario the builders or the cost models refuse.
Simulation simulate_scenario(const scenario::Scenario& scenario,
                             const SimulateOptions& options = {});
/// The result alone.
result::RunResult simulate(const scenario::Scenario& scenario, const SimulateOptions& options = {});
/// A plan already built for `scenario` (built once, costed many times: the measured fit),
/// under the scenario's cost models.
result::RunResult simulate(const plan::StepPlan& plan, const scenario::Scenario& scenario,
                           const CostOptions& cost = {});

}  // namespace stratagem::sim
