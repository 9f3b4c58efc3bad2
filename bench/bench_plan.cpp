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
