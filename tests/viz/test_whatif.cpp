#include <gtest/gtest.h>

#include "engine/spec/error.hpp"
#include "tests/viz/viz_test_util.hpp"
#include "viz/model/sim_worker.hpp"
#include "viz/model/whatif.hpp"

namespace stratagem::viz {
namespace {

TEST(WhatIf, KnobsRoundTripTheScenario) {
  const auto base = test::gpipe4_scenario();
  const WhatIf k = what_if_of(base);
  EXPECT_EQ(k.dp, 1);
  EXPECT_EQ(k.pp, 4);
  EXPECT_EQ(k.schedule, spec::Schedule::gpipe);
  EXPECT_EQ(k.micro_batches, 8);
  const auto same = apply_what_if(base, k);
  EXPECT_EQ(same.strategy.pp, 4);
  EXPECT_EQ(same.training.global_batch, 16);
  EXPECT_EQ(same.cluster.nodes, 1);
}

TEST(WhatIf, ChangesFollowTheScenarioRules) {
  const auto base = test::gpipe4_scenario();
  WhatIf k = what_if_of(base);
  set_knobs(k, "schedule=1f1b,micro_batches=16,precision=fp16,recompute=selective");
  auto s = apply_what_if(base, k);
  EXPECT_EQ(s.strategy.schedule, spec::Schedule::one_f_one_b);
  EXPECT_EQ(s.strategy.grad_accum, 16);
  EXPECT_EQ(s.training.global_batch, 2 * 16 * 1);  // micro-batch size × micro-batches × dp
  EXPECT_EQ(s.strategy.precision, spec::Precision::fp16);
  EXPECT_EQ(s.strategy.recompute, spec::Recompute::selective);
  // dp 2 × pp 4 = 8 GPUs: two of the base's 4-GPU nodes.
  set_knob(k, "dp", "2");
  s = apply_what_if(base, k);
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.world_size(), 8);
}

TEST(WhatIf, InvalidCombinationsSayWhy) {
  const auto base = test::gpipe4_scenario();
  WhatIf k = what_if_of(base);
  k.sharding = spec::Sharding::zero2;  // shards gradients: no pipeline
  try {
    apply_what_if(base, k);
    FAIL() << "zero2 with pp 4 was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.sharding");
  }
  k = what_if_of(base);
  k.pp = 3;  // 3 GPUs are not a whole number of 4-GPU nodes
  EXPECT_THROW(apply_what_if(base, k), SpecError);
  EXPECT_THROW(set_knob(k, "schedule", "zigzag"), SpecError);
  EXPECT_THROW(set_knob(k, "dp", "0"), SpecError);
  EXPECT_THROW(set_knob(k, "gpu", "no-such-gpu"), SpecError);
  EXPECT_THROW(set_knobs(k, "dp"), SpecError);
  EXPECT_THROW(set_knobs(k, "tp=2"), SpecError);
}

TEST(SimWorker, SimulatesOffTheCallingThreadAndKeepsTheNewest) {
  SimWorker worker;
  const auto base = test::gpipe4_scenario();
  WhatIf k = what_if_of(base);
  k.schedule = spec::Schedule::one_f_one_b;
  worker.submit(base, "first");
  const auto second = worker.submit(apply_what_if(base, k), "second");
  worker.wait_idle();
  EXPECT_FALSE(worker.busy());
  auto out = worker.poll();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->request, second);
  ASSERT_TRUE(out->doc) << out->error;
  EXPECT_EQ(out->doc->label(), "second");
  EXPECT_EQ(out->doc->result().scenario.strategy.schedule, spec::Schedule::one_f_one_b);
  EXPECT_FALSE(worker.poll());  // each outcome is handed out once
}

TEST(Variants, SimulatesTheStrategiesOfOneScenario) {
  std::vector<std::string> skipped;
  const auto docs = simulate_variants(test::gpipe4_scenario(), {"gpipe", "1f1b", "zero3"}, skipped);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]->label(), "gpipe");
  EXPECT_EQ(docs[2]->result().scenario.strategy.sharding, spec::Sharding::zero3);
  EXPECT_TRUE(skipped.empty());
}

}  // namespace
}  // namespace stratagem::viz
