#include "sim/simulate.hpp"

#include <chrono>

#include "sim/simulator.hpp"

namespace stratagem::sim {

namespace {

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Simulation simulate_scenario(const scenario::Scenario& scenario, const SimulateOptions& options) {
  using Clock = std::chrono::steady_clock;
  const CostModels models = make_cost_models(scenario, options.cost);
  Simulation out;
  const auto t0 = Clock::now();
  out.plan = plan::build_plan(scenario, options.build);
  const auto t1 = Clock::now();
  out.result = Simulator().run(out.plan, models);
  out.build_s = seconds(t0, t1);
  out.simulate_s = seconds(t1, Clock::now());
  return out;
}

result::RunResult simulate(const scenario::Scenario& scenario, const SimulateOptions& options) {
  return simulate_scenario(scenario, options).result;
}

result::RunResult simulate(const plan::StepPlan& plan, const scenario::Scenario& scenario,
                           const CostOptions& cost) {
  return Simulator().run(plan, make_cost_models(scenario, cost));
}

}  // namespace stratagem::sim
