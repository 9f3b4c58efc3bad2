// Whole-step simulation, the memory model and search: the speed targets
// (GPT-3 175B on 1,024 A100 in < 1 s, an 8-GPU step in < 5 ms, search ≥ 1,000 configurations
// of an 8-GPU cluster in < 5 s) are measured here, not asserted in tests.
#include <benchmark/benchmark.h>

#include "bench/bench_scenarios.hpp"
#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/simulate.hpp"
#include "sim/simulator.hpp"
#include "tune/search.hpp"

namespace {

using namespace stratagem;

void BM_SimulateStep(benchmark::State& state) {
  const auto scenario = bench::gpt3_on(static_cast<int>(state.range(0)));
  const auto plan = plan::build_plan(scenario);
  const auto models = sim::make_cost_models(scenario);
  sim::Simulator simulator;
  std::uint64_t events = 0;
  double step = 0;
  for (auto _ : state) {
    auto r = simulator.run(plan, models);
    events = r.events;
    step = r.metrics.step_time_s;
    benchmark::DoNotOptimize(r);
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(events) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["sim_step_time_s"] = step;
}
BENCHMARK(BM_SimulateStep)
    ->Arg(8)
    ->Arg(64)
    ->Arg(1024)
    ->Arg(4096)
    ->ArgName("gpus")
    ->Unit(benchmark::kMillisecond);

// The same step with compute spread (2 % per op and per rank): every collective starts at the
// expected latest arrival of its members (sim/jitter.hpp), what a calibrated profile turns on.
void BM_SimulateStepWithJitter(benchmark::State& state) {
  const auto scenario = bench::gpt3_on(static_cast<int>(state.range(0)));
  const auto plan = plan::build_plan(scenario);
  sim::CostOptions o;
  o.compute_jitter_cv = 0.02;
  o.rank_jitter_cv = 0.02;
  const auto models = sim::make_cost_models(scenario, o);
  sim::Simulator simulator;
  double step = 0;
  for (auto _ : state) {
    auto r = simulator.run(plan, models);
    step = r.metrics.step_time_s;
    benchmark::DoNotOptimize(r);
  }
  state.counters["sim_step_time_s"] = step;
}
BENCHMARK(BM_SimulateStepWithJitter)
    ->Arg(8)
    ->Arg(1024)
    ->Arg(4096)
    ->ArgName("gpus")
    ->Unit(benchmark::kMillisecond);

// Plan building + simulation, what `stratagem sim` does per scenario.
void BM_BuildAndSimulate(benchmark::State& state) {
  const auto scenario = bench::gpt3_on(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = sim::simulate(scenario);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_BuildAndSimulate)->Arg(8)->Arg(1024)->ArgName("gpus")->Unit(benchmark::kMillisecond);

// Megatron 3D parallelism (tp 8 × pp 16 × dp 8 on 1,024 GPUs): plan building + simulation.
void BM_BuildAndSimulate3D(benchmark::State& state) {
  const auto scenario = bench::gpt3_3d_on(static_cast<int>(state.range(0)));
  std::size_t ops = 0;
  for (auto _ : state) {
    auto r = sim::simulate_scenario(scenario);
    ops = r.plan.ops.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_BuildAndSimulate3D)
    ->Arg(128)
    ->Arg(1024)
    ->ArgName("gpus")
    ->Unit(benchmark::kMillisecond);

// Huge clusters (#19): build and simulate, one process each, for pure DP, dp × pp and 3D.
// Folding keeps the work independent of dp; what grows with the GPU count is per-rank
// bookkeeping (coordinates, groups, one result per rank).
void BM_HugeCluster(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const auto kind = state.range(1);
  const auto scenario = kind == 0   ? bench::gpt2_dp_on(gpus)
                        : kind == 1 ? bench::gpt3_on(gpus, 16, 32)
                                    : bench::gpt3_3d_on(gpus, 32);
  for (auto _ : state) {
    auto r = sim::simulate(scenario);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(kind == 0 ? "gpt2 dp" : kind == 1 ? "gpt3-175b dp x pp16, 32 mb" : "gpt3-175b tp8 x pp16 x dp, 32 mb");
}
BENCHMARK(BM_HugeCluster)
    ->ArgsProduct({{65536, 262144, 1048576}, {0, 1, 2}})
    ->ArgNames({"gpus", "layout"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_DefaultScenario(benchmark::State& state) {
  const auto scenario = scenario::load_scenario("default");
  for (auto _ : state) {
    auto r = sim::simulate(scenario);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_DefaultScenario)->Unit(benchmark::kMillisecond);

void BM_MemoryModel(benchmark::State& state) {
  const auto scenario = bench::gpt3_on(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(memory::estimate_memory(scenario));
}
BENCHMARK(BM_MemoryModel)->Arg(8)->Arg(1024)->ArgName("gpus")->Unit(benchmark::kMicrosecond);

// Runs `search` on `base` once per iteration; counts configurations, simulated ones and rate.
void search_counting(benchmark::State& state, const scenario::Scenario& base) {
  tune::SearchResult last;
  for (auto _ : state) {
    last = tune::search(base, {});
    benchmark::DoNotOptimize(last);
  }
  state.counters["configurations"] = last.enumerated;
  state.counters["simulated"] = last.simulated;
  state.counters["configs_per_s"] = benchmark::Counter(
      static_cast<double>(last.enumerated) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Search8Gpus(benchmark::State& state) {
  nlohmann::json j = {{"model", "llama2-7b"},
                      {"cluster", "dgx-a100-80gb"},
                      {"strategy", {{"dp", 8}}},
                      {"training", {{"seq_len", 2048}, {"global_batch", 256}}}};
  search_counting(state, scenario::parse_scenario(j));
}
BENCHMARK(BM_Search8Gpus)->Unit(benchmark::kMillisecond)->Iterations(1);

// Search with tensor parallelism on 8 DGX A100 nodes: Llama-2-70B, global batch 512 × 4096.
void BM_Search8NodesWithTP(benchmark::State& state) {
  nlohmann::json j = {{"model", "llama2-70b"},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 8}}},
                      {"strategy", {{"dp", 64}}},
                      {"training", {{"seq_len", 4096}, {"global_batch", 512}}}};
  search_counting(state, scenario::parse_scenario(j));
}
BENCHMARK(BM_Search8NodesWithTP)->Unit(benchmark::kMillisecond)->Iterations(1);

// The configurations people run now (#14): long context with FSDP × CP, fp8 3D, a GB200 NVL72
// rack. Arg: 0 fsdp-cp8-llama3.1-8b-128k-8xh100, 1 3d-fp8-tp8-pp4-llama3-70b-64xh100,
// 2 fsdp-tp4-llama3-70b-gb200-nvl72.
void BM_ModernScenario(benchmark::State& state) {
  static const char* kNames[] = {"fsdp-cp8-llama3.1-8b-128k-8xh100",
                                 "3d-fp8-tp8-pp4-llama3-70b-64xh100",
                                 "fsdp-tp4-llama3-70b-gb200-nvl72"};
  const auto scenario = scenario::load_scenario(kNames[state.range(0)]);
  for (auto _ : state) {
    auto r = sim::simulate(scenario);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_ModernScenario)->DenseRange(0, 2)->ArgName("scenario")->Unit(benchmark::kMillisecond);

// Search at 64k tokens on one DGX H100: context parallelism and fp8 enter the space.
void BM_SearchLongContextH100(benchmark::State& state) {
  nlohmann::json j = {{"model", "llama3-8b"},
                      {"cluster", "dgx-h100"},
                      {"strategy", {{"dp", 8}}},
                      {"training", {{"seq_len", 65536}, {"global_batch", 16}}}};
  search_counting(state, scenario::parse_scenario(j));
}
BENCHMARK(BM_SearchLongContextH100)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
