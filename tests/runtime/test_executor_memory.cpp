// Measured memory of the executor: the model states each rank really allocates (parameters,
// gradients, Adam states, fp32 master weights) shrink ZeRO stage by ZeRO stage and match the
// analytic model (engine/memory) within 5%; transient classes come and go within a step.
#include <gtest/gtest.h>

#include "engine/memory/model_states.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

using plan::TensorClass;

double at_start(const result::RankResult& r, TensorClass c) {
  return r.memory.bytes.front()[static_cast<int>(c)];
}

double model_state_bytes(const result::RankResult& r) {
  return at_start(r, TensorClass::params) + at_start(r, TensorClass::grads) +
         at_start(r, TensorClass::optimizer) + at_start(r, TensorClass::master_weights);
}

struct Measured {
  double model_states = 0;
  double analytic = 0;
  result::RankResult trace;
};

Measured measure(const std::string& sharding) {
  auto s = tiny_scenario(4,
                         {{"dp", 4},
                          {"micro_batch_size", 1},
                          {"grad_accum", 2},
                          {"sharding", sharding},
                          {"mixed_precision", "bf16"}},
                         {}, 8);
  auto run = run_inproc(s, train_options(2));
  Measured m;
  m.trace = run.results[1].trace;
  m.model_states = model_state_bytes(m.trace);
  const double psi = scenario::total_params(s.model);
  m.analytic = memory::model_states(psi, 4, s.strategy).gpu_bytes();
  return m;
}

TEST(ExecutorMemory, ZeroStagesShrinkModelStatesAsAnalysed) {
  const Measured ddp = measure("none"), z1 = measure("zero1"), z2 = measure("zero2"),
                 z3 = measure("zero3");
  EXPECT_LT(z3.model_states, z2.model_states);
  EXPECT_LT(z2.model_states, z1.model_states);
  EXPECT_LT(z1.model_states, ddp.model_states);
  for (const Measured* m : {&ddp, &z1, &z2, &z3}) {
    EXPECT_NEAR(m->model_states, m->analytic, 0.05 * m->analytic);
  }
  // Mixed-precision Adam: (2 + 2 + 12)Ψ for DDP, exactly (no padding in this model).
  EXPECT_EQ(ddp.model_states, ddp.analytic);
}

TEST(ExecutorMemory, TransientClassesReturnToZero) {
  const Measured z3 = measure("zero3");
  const auto& mem = z3.trace.memory;
  ASSERT_GE(mem.bytes.size(), 3u);
  double act_peak = 0, gathered_peak = 0, buckets_peak = 0;
  for (const auto& b : mem.bytes) {
    act_peak = std::max(act_peak, b[static_cast<int>(TensorClass::activations)]);
    gathered_peak = std::max(gathered_peak, b[static_cast<int>(TensorClass::gathered_params)]);
    buckets_peak = std::max(buckets_peak, b[static_cast<int>(TensorClass::comm_buckets)]);
  }
  EXPECT_GT(act_peak, 0);
  EXPECT_GT(gathered_peak, 0);
  EXPECT_GT(buckets_peak, 0);
  for (auto c :
       {TensorClass::activations, TensorClass::gathered_params, TensorClass::comm_buckets}) {
    EXPECT_EQ(mem.bytes.back()[static_cast<int>(c)], 0) << plan::to_string(c);
  }
  EXPECT_GE(z3.trace.peak_memory_bytes, z3.model_states + act_peak);
}

TEST(ExecutorMemory, SpansCoverEveryOpOfTheRank) {
  auto s = tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 2}, {"bucket_mb", 0.01}});
  auto run = run_inproc(s, train_options(2));
  const auto& plan = run.trainers[0]->plan();
  std::size_t ops = 0;
  for (const auto& stream : plan.ranks[0].streams) ops += stream.size();
  const auto& spans = run.results[0].trace.spans;
  ASSERT_EQ(spans.size(), ops);
  for (const auto& sp : spans) {
    EXPECT_LE(sp.start_s, sp.end_s);
    EXPECT_GE(sp.start_s, 0);
  }
  // DDP with one bucket per unit: some all-reduce starts before the last backward ends.
  double last_backward_end = 0, first_allreduce_start = 1e9;
  for (const auto& sp : spans) {
    if (sp.kind == result::SpanKind::backward)
      last_backward_end = std::max(last_backward_end, sp.end_s);
    if (sp.kind == result::SpanKind::all_reduce) {
      first_allreduce_start = std::min(first_allreduce_start, sp.start_s);
    }
  }
  EXPECT_LT(first_allreduce_start, last_backward_end);
}

}  // namespace
}  // namespace stratagem::test
