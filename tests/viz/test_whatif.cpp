#include <gtest/gtest.h>

#include "engine/scenario/error.hpp"
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
  EXPECT_EQ(k.schedule, scenario::Schedule::gpipe);
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
  EXPECT_EQ(s.strategy.schedule, scenario::Schedule::one_f_one_b);
  EXPECT_EQ(s.strategy.grad_accum, 16);
  EXPECT_EQ(s.training.global_batch, 2 * 16 * 1);  // micro-batch size × micro-batches × dp
  EXPECT_EQ(s.strategy.precision, scenario::Precision::fp16);
  EXPECT_EQ(s.strategy.recompute, scenario::Recompute::selective);
  // dp 2 × pp 4 = 8 GPUs: two of the base's 4-GPU nodes.
  set_knob(k, "dp", "2");
  s = apply_what_if(base, k);
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.world_size(), 8);
}

TEST(WhatIf, InvalidCombinationsSayWhy) {
  const auto base = test::gpipe4_scenario();
  WhatIf k = what_if_of(base);
  k.sharding = scenario::Sharding::zero2;  // shards gradients: no pipeline
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
  EXPECT_THROW(set_knobs(k, "ep=2"), SpecError);
}

TEST(WhatIf, TensorParallelKnobsAndTheWorldDpTimesTpTimesPp) {
  const auto base = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                            "/scenarios/3d-tp8-pp4-llama3-70b-8xh100.json");
  WhatIf k = what_if_of(base);
  EXPECT_EQ(k.dp, 2);
  EXPECT_EQ(k.tp, 8);
  EXPECT_TRUE(k.sequence_parallel);
  EXPECT_EQ(k.pp, 4);
  EXPECT_EQ(world_of(k), 64);
  auto same = apply_what_if(base, k);
  EXPECT_EQ(same.strategy.tp, 8);
  EXPECT_TRUE(same.strategy.sequence_parallel);
  EXPECT_EQ(same.cluster.nodes, 8);
  EXPECT_EQ(same.world_size(), 64);
  // Half the tensor parallelism, twice the replicas: the same 64 GPUs on 8 nodes.
  set_knobs(k, "tp=4,dp=4");
  EXPECT_EQ(world_of(k), 64);
  auto s = apply_what_if(base, k);
  EXPECT_EQ(s.strategy.tp, 4);
  EXPECT_EQ(s.cluster.nodes, 8);
  EXPECT_EQ(s.training.global_batch, 1 * 32 * 4);  // TP peers share their micro-batches
  // tp 8 with dp 4: 128 GPUs, the nodes follow.
  set_knob(k, "tp", "8");
  EXPECT_EQ(apply_what_if(base, k).cluster.nodes, 16);
  // Sequence parallelism applies only with tp > 1 (and is kept for when tp comes back).
  set_knobs(k, "tp=1,dp=8");
  s = apply_what_if(base, k);
  EXPECT_FALSE(s.strategy.sequence_parallel);
  EXPECT_EQ(s.world_size(), 32);
  EXPECT_EQ(s.cluster.nodes, 4);
  EXPECT_TRUE(k.sequence_parallel);
  set_knob(k, "sequence_parallel", "false");
  EXPECT_FALSE(k.sequence_parallel);
  EXPECT_THROW(set_knob(k, "sequence_parallel", "maybe"), SpecError);
  EXPECT_THROW(set_knob(k, "tp", "0"), SpecError);
}

TEST(WhatIf, TensorParallelismOnAPipelineScenario) {
  const auto base = test::gpipe4_scenario();  // gpt2-xl: 25 heads
  WhatIf k = what_if_of(base);
  EXPECT_EQ(k.tp, 1);
  EXPECT_FALSE(k.sequence_parallel);
  k.tp = 2;  // 25 heads do not split over 2 ranks
  try {
    apply_what_if(base, k);
    FAIL() << "tp 2 of gpt2-xl was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.tp");
  }
  const auto tiny = test::tp_scenario(1, 1, 2);
  k = what_if_of(tiny);
  set_knobs(k, "tp=2,sequence_parallel=true");
  const auto s = apply_what_if(tiny, k);
  EXPECT_EQ(s.world_size(), 4);
  EXPECT_EQ(s.cluster.nodes, 2);  // two of the base's 2-GPU nodes
  EXPECT_TRUE(s.strategy.sequence_parallel);
}

TEST(SimWorker, SimulatesOffTheCallingThreadAndKeepsTheNewest) {
  SimWorker worker;
  const auto base = test::gpipe4_scenario();
  WhatIf k = what_if_of(base);
  k.schedule = scenario::Schedule::one_f_one_b;
  worker.submit(base, "first");
  const auto second = worker.submit(apply_what_if(base, k), "second");
  worker.wait_idle();
  EXPECT_FALSE(worker.busy());
  auto out = worker.poll();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->request, second);
  ASSERT_TRUE(out->doc) << out->error;
  EXPECT_EQ(out->doc->label(), "second");
  EXPECT_EQ(out->doc->result().scenario.strategy.schedule, scenario::Schedule::one_f_one_b);
  EXPECT_FALSE(worker.poll());  // each outcome is handed out once
}

TEST(Variants, SimulatesTheStrategiesOfOneScenario) {
  std::vector<std::string> skipped;
  const auto docs = simulate_variants(test::gpipe4_scenario(), {"gpipe", "1f1b", "zero3"}, skipped);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]->label(), "gpipe");
  EXPECT_EQ(docs[2]->result().scenario.strategy.sharding, scenario::Sharding::zero3);
  EXPECT_TRUE(skipped.empty());
}

// Context parallelism, the attention kernel and fp8 (#14): the world counts cp, fp8 needs a
// GPU that has it, eager attention cannot ring, fp8_all_gather goes when fp8 does.
TEST(WhatIf, ContextParallelAttentionAndFp8Knobs) {
  const auto base = scenario::load_scenario("fsdp-cp2-llama3.1-8b-64k-8xh100");
  WhatIf k = what_if_of(base);
  EXPECT_EQ(k.cp, 2);
  EXPECT_EQ(k.attention, scenario::Attention::flash);
  EXPECT_EQ(world_of(k), 8);
  set_knobs(k, "cp=4,dp=2,micro_batches=8,precision=fp8");
  auto s = apply_what_if(base, k);
  EXPECT_EQ(s.strategy.cp, 4);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.training.global_batch, 1 * 8 * 2);  // cp ranks share their sequences
  EXPECT_EQ(s.strategy.precision, scenario::Precision::fp8);
  set_knob(k, "attention", "eager");
  try {
    apply_what_if(base, k);
    FAIL() << "eager attention with cp 4 was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.attention");
  }
  set_knobs(k, "attention=flash,gpu=a100-80gb");
  try {
    apply_what_if(base, k);
    FAIL() << "fp8 on an A100 was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.mixed_precision");
  }
  EXPECT_THROW(set_knob(k, "attention", "sparse"), SpecError);
}

}  // namespace
}  // namespace stratagem::viz
