// Plan building: ops per second for growing scenarios.
#include <benchmark/benchmark.h>

#include "bench/bench_scenarios.hpp"
#include "engine/plan/builder.hpp"

namespace {

void BM_BuildPlan(benchmark::State& state) {
  const auto scenario = stratagem::bench::gpt3_on(static_cast<int>(state.range(0)));
  const bool fold = state.range(1) != 0;
  std::size_t ops = 0;
  for (auto _ : state) {
    auto plan = stratagem::plan::build_plan(scenario, {.fold = fold});
    ops = plan.ops.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildPlan)
    ->ArgsProduct({{8, 64, 1024, 4096}, {1}})
    ->Args({64, 0})
    ->ArgNames({"gpus", "fold"})
    ->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// Megatron 3D (tp 8 × pp 16 × dp 8 on 1,024 GPUs), folded: the TP chains make most of the ops.
void BM_BuildPlan3D(benchmark::State& state) {
  const auto scenario = stratagem::bench::gpt3_3d_on(static_cast<int>(state.range(0)));
  std::size_t ops = 0;
  for (auto _ : state) {
    auto plan = stratagem::plan::build_plan(scenario);
    ops = plan.ops.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BuildPlan3D)->Arg(1024)->ArgName("gpus")->Unit(benchmark::kMillisecond);

}  // namespace
