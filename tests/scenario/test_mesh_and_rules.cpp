// The one rank order (MeshShape) and the strategy rules every rewrite follows
// (strategy_rewrite.hpp): what search, compare's variants and the what-if rely on.
#include <gtest/gtest.h>

#include <set>

#include "engine/scenario/error.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/scenario/strategy_rewrite.hpp"

namespace stratagem::scenario {
namespace {

TEST(MeshShape, TensorParallelFastestThenContextDataPipeline) {
  const MeshShape m{.dp = 3, .pp = 2, .tp = 4, .cp = 2};
  // Megatron-LM's order: consecutive ranks differ in tp, then cp, then dp, then stage.
  EXPECT_EQ(m.rank_of(0, 0, 1, 0), 1);
  EXPECT_EQ(m.rank_of(0, 0, 0, 1), 4);
  EXPECT_EQ(m.rank_of(0, 1, 0, 0), 8);
  EXPECT_EQ(m.rank_of(1, 0, 0, 0), 24);
  std::set<int> seen;
  for (int r = 0; r < 48; ++r) {
    const MeshCoord c = m.coord_of(r);
    EXPECT_LT(c.tp, 4);
    EXPECT_LT(c.cp, 2);
    EXPECT_LT(c.dp, 3);
    EXPECT_LT(c.stage, 2);
    EXPECT_EQ(m.rank_of(c), r) << r;
    seen.insert(r);
  }
  EXPECT_EQ(seen.size(), 48u);
  const MeshCoord last = m.coord_of(47);
  EXPECT_EQ(last.stage, 1);
  EXPECT_EQ(last.dp, 2);
  EXPECT_EQ(last.cp, 1);
  EXPECT_EQ(last.tp, 3);
}

TEST(StrategyRules, TheGlobalBatchFixesTheMicroBatches) {
  EXPECT_EQ(grad_accum_for(512, 2, 8), 32);
  EXPECT_FALSE(grad_accum_for(512, 3, 8).has_value());
  EXPECT_EQ(require_grad_accum(1536, 1, 8), 192);
  try {
    require_grad_accum(100, 4, 8);
    FAIL() << "32 does not divide 100";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "training.global_batch");
    EXPECT_NE(std::string(e.what()).find("micro_batch_size × dp = 32"), std::string::npos);
  }
  EXPECT_EQ(global_batch_of(2, 16, 64), 2048);
}

TEST(StrategyRules, SequenceParallelismFp8AllGatherAndOffloadWhereTheyCanRun) {
  EXPECT_FALSE(sequence_parallel_allowed(1));
  EXPECT_TRUE(sequence_parallel_allowed(2));
  EXPECT_TRUE(default_sequence_parallel(8, 4096));
  EXPECT_FALSE(default_sequence_parallel(8, 4100));  // the sequence does not split
  EXPECT_FALSE(default_sequence_parallel(1, 4096));
  EXPECT_TRUE(fp8_all_gather_allowed(Precision::fp8, Sharding::fsdp_full_shard));
  EXPECT_TRUE(fp8_all_gather_allowed(Precision::fp8, Sharding::zero3));
  EXPECT_FALSE(fp8_all_gather_allowed(Precision::fp8, Sharding::zero2));  // nothing gathered
  EXPECT_FALSE(fp8_all_gather_allowed(Precision::bf16, Sharding::fsdp_full_shard));
  EXPECT_TRUE(optimizer_offload_allowed(Sharding::zero1));
  EXPECT_FALSE(optimizer_offload_allowed(Sharding::none));
}

TEST(StrategyRules, TensorParallelismMustSplitTheModelsHeadsAndMlp) {
  const Scenario s = load_scenario("default");  // GPT-2 XL: 25 heads
  EXPECT_FALSE(tensor_parallel_model_refusal(s.model, 1).has_value());
  EXPECT_FALSE(tensor_parallel_model_refusal(s.model, 5).has_value());
  const auto refusal = tensor_parallel_model_refusal(s.model, 2);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->path(), "strategy.tp");
  EXPECT_NE(std::string(refusal->what()).find("attention heads"), std::string::npos);
}

}  // namespace
}  // namespace stratagem::scenario
