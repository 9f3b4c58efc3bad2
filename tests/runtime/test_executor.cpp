// The executor runs every strategy's plan to the same training as one process: same losses
// (within 1e-5 relative) and same parameters (within 1e-5) after 5 fp32 steps on the same
// global batch. Ranks are threads over the in-process communicator.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "engine/scenario/error.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

constexpr int kSteps = 5;
constexpr double kLossRel = 1e-5;
constexpr double kParamAbs = 1e-5;

const Reference& reference(const nlohmann::json& model = {}) { return one_process(model, kSteps); }

void expect_same_training(const nlohmann::json& strategy, int world,
                          const nlohmann::json& model = {}, int nodes = 1) {
  const auto& ref = reference(model);
  auto s = tiny_scenario(world, strategy, model, 8, nodes);
  auto run = run_inproc(s, train_options(kSteps));
  expect_same_losses(run, ref.losses, kLossRel);
  expect_same_params(run, ref.params, s, kParamAbs);
}

TEST(Executor, ReferenceLearns) {
  const auto& ref = reference();
  ASSERT_EQ(ref.losses.size(), static_cast<std::size_t>(kSteps));
  EXPECT_NEAR(ref.losses[0], std::log(64.0), 0.2);  // uniform over the vocabulary at start
  EXPECT_LT(ref.losses.back(), ref.losses.front());
}

TEST(Executor, SyntheticTaskIsLearnedIn50Steps) {
  auto s = tiny_scenario(1, {{"micro_batch_size", 8}});
  const auto losses = run_inproc(s, train_options(50)).results[0].losses;
  std::cout << "  loss " << losses.front() << " -> " << losses.back() << " in 50 steps\n";
  EXPECT_LT(losses.back(), 0.75 * losses.front());
}

TEST(Executor, SingleProcessSplitsAlike) {
  expect_same_training({{"micro_batch_size", 8}, {"grad_accum", 1}}, 1);
}

TEST(Executor, Ddp) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}}, 2);
}
TEST(Executor, DdpFourRanksSmallBuckets) {
  // bucket_mb tiny: one bucket per unit, all-reduces overlap the rest of the backward.
  expect_same_training({{"dp", 4}, {"micro_batch_size", 1}, {"bucket_mb", 0.01}}, 4);
}
TEST(Executor, Zero1) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero1"}}, 2);
}
TEST(Executor, Zero2) {
  expect_same_training(
      {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero2"}, {"bucket_mb", 0.02}}, 2);
}
TEST(Executor, Zero3) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero3"}}, 2);
}
TEST(Executor, Zero3FourRanks) {
  expect_same_training({{"dp", 4}, {"micro_batch_size", 1}, {"sharding", "zero3"}}, 4);
}
TEST(Executor, FsdpShardGradOp) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "SHARD_GRAD_OP"}}, 2);
}
TEST(Executor, FsdpFullShard) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "FULL_SHARD"}}, 2);
}
TEST(Executor, FsdpHybridShard) {
  // Shard within each of 2 "nodes", all-reduce the shards across them.
  expect_same_training({{"dp", 4}, {"micro_batch_size", 1}, {"sharding", "HYBRID_SHARD"}}, 4, {},
                       2);
}
TEST(Executor, Zero2OptimizerOffload) {
  expect_same_training(
      {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero2"}, {"offload_optimizer", "cpu"}}, 2);
}
TEST(Executor, GPipe) {
  expect_same_training({{"pp", 2}, {"schedule", "gpipe"}, {"micro_batch_size", 2}}, 2);
}
TEST(Executor, OneFOneB) {
  expect_same_training({{"pp", 4}, {"schedule", "1f1b"}, {"micro_batch_size", 2}}, 4);
}
TEST(Executor, Interleaved) {
  expect_same_training(
      {{"pp", 2}, {"schedule", "interleaved"}, {"chunks", 2}, {"micro_batch_size", 2}}, 2);
}
TEST(Executor, InterleavedWithDataParallel) {
  // One bucket per unit: every bucket lies inside one chunk.
  expect_same_training({{"dp", 2},
                        {"pp", 2},
                        {"schedule", "interleaved"},
                        {"chunks", 2},
                        {"micro_batch_size", 1},
                        {"bucket_mb", 0.02}},
                       4);
}
// A bucket holding units of both chunks (bucket_mb 25 here) must be synced once, after the
// later of its units' last backwards (a builder bug once launched it after each chunk).
TEST(Executor, InterleavedWithDataParallelOneBucket) {
  expect_same_training(
      {{"dp", 2}, {"pp", 2}, {"schedule", "interleaved"}, {"chunks", 2}, {"micro_batch_size", 1}},
      4);
}
TEST(Executor, DataAndPipelineParallel) {
  expect_same_training({{"dp", 2}, {"pp", 2}, {"schedule", "1f1b"}, {"micro_batch_size", 1}}, 4);
}
TEST(Executor, Zero1WithPipeline) {
  expect_same_training({{"dp", 2}, {"pp", 2}, {"sharding", "zero1"}, {"micro_batch_size", 1}}, 4);
}
TEST(Executor, FullRecompute) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"recompute", "full"}}, 2);
}
TEST(Executor, SelectiveRecomputeZero3) {
  expect_same_training(
      {{"dp", 2}, {"micro_batch_size", 2}, {"recompute", "selective"}, {"sharding", "zero3"}}, 2);
}

// Tied embeddings: on one stage the head reads the embedding's table; across a pipeline the
// last stage keeps a copy whose gradient is summed with the first stage's.
TEST(Executor, TiedDdp) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}}, 2, {{"tied_embeddings", true}});
}
TEST(Executor, TiedPipeline) {
  expect_same_training({{"dp", 2}, {"pp", 2}, {"micro_batch_size", 1}}, 4,
                       {{"tied_embeddings", true}});
}
TEST(Executor, TiedZero3) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero3"}}, 2,
                       {{"tied_embeddings", true}});
}

TEST(Executor, TiedPipelineWithShardedOptimizer) {
  // The two word tables are summed before the reduce-scatter of the bucket that holds them.
  expect_same_training({{"dp", 2}, {"pp", 2}, {"sharding", "zero1"}, {"micro_batch_size", 1}}, 4,
                       {{"tied_embeddings", true}});
}
TEST(Executor, TiedFullShardGathersTableForHead) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "FULL_SHARD"}}, 2,
                       {{"tied_embeddings", true}});
}
TEST(Executor, TiedShardGradOp) {
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "SHARD_GRAD_OP"}},
                       2, {{"tied_embeddings", true}});
}

TEST(Executor, ModernBlocksUnderZero2) {
  // RMSNorm, SwiGLU, rotary positions, grouped-query attention, no biases.
  const nlohmann::json llama = {{"norm", "rmsnorm"}, {"mlp", "swiglu"}, {"positions", "rotary"},
                                {"kv_heads", 2},     {"bias", false},   {"ffn_hidden", 96}};
  expect_same_training({{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero2"}}, 2, llama);
}

}  // namespace
}  // namespace stratagem::test
