// estimate_memory on whole scenarios: a tiny model whose every byte is computed by hand, the
// ranks expansion, fits/short, and the time it takes on the largest shapes.
#include <gtest/gtest.h>

#include <chrono>

#include "engine/memory/memory.hpp"
#include "engine/plan/plan.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/scenario/units.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::memory {
namespace {

using plan::TensorClass;

// A decoder small enough to count by hand (h 8, 2 heads, f 32, V 16, 8 positions, tied,
// biases, LayerNorm, GELU):
//   block: q,k,v,o 4·8·8 = 256 + MLP 2·8·32 = 512 + biases 4·8 + 32 + 8 = 72 + 2 LN 32 = 872
//   embedding: 16·8 + 8·8 = 192; head (tied, pp 1): final LN 2·8 = 16, pp > 1 adds 16·8 = 128
// Activations at seq 4, micro-batch 1, 16-bit, eager attention (Korthikanti et al. 2022):
//   block s·b·h·(34 + 5·a·s/h) = 32·(34 + 5) = 1248; selective 34·32 = 1088; full 2·32 = 64
//   head s·b·(h·2 + 4·V) = 4·(16 + 64) = 320
constexpr double kBlock = 872, kEmbedding = 192, kHeadPp1 = 16, kHeadPp2 = 16 + 128;
constexpr double kActBlock = 1248, kActSelective = 1088, kActFull = 64, kActHead = 320;

scenario::Scenario tiny(int layers, int dp, int pp, const std::string& strategy_extra,
                        int nodes = 1) {
  const std::string text = R"({
    "name": "tiny",
    "model": {"layers": )" +
                           std::to_string(layers) +
                           R"(, "hidden": 8, "heads": 2, "vocab": 16, "max_positions": 8},
    "cluster": {"preset": "dgx-a100-80gb", "nodes": )" +
                           std::to_string(nodes) + R"(, "gpus_per_node": )" +
                           std::to_string(dp * pp / nodes) + R"(},
    "strategy": {"dp": )" + std::to_string(dp) +
                           R"(, "pp": )" + std::to_string(pp) + R"(, "attention": "eager")" +
                           strategy_extra + R"(},
    "training": {"seq_len": 4}
  })";
  return scenario::parse_scenario(nlohmann::json::parse(text));
}

TEST(TinyModel, HandCountsMatchTheSpec) {
  const auto s = tiny(2, 1, 1, "");
  const auto units = workload::make_units(s);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_DOUBLE_EQ(units[0].params, kEmbedding);
  EXPECT_DOUBLE_EQ(units[1].params, kBlock);
  EXPECT_DOUBLE_EQ(units[3].params, kHeadPp1);
}

TEST(Estimate, DdpPipelineOneFOneB) {
  // pp 2, 1F1B, 4 micro-batches, bf16 Adam: stage 0 = embedding + block 1, stage 1 = block 2 +
  // head (with the tied embedding copy).
  const auto s =
      tiny(2, 1, 2, R"(, "grad_accum": 4, "mixed_precision": "bf16", "optimizer": "adam")");
  const MemoryReport r = estimate_memory(s);
  ASSERT_EQ(r.stages.size(), 2u);
  const double psi0 = kEmbedding + kBlock, psi1 = kBlock + kHeadPp2;
  const RankMemory& s0 = r.stages[0];
  const RankMemory& s1 = r.stages[1];
  EXPECT_DOUBLE_EQ(s0.stage_params, psi0);
  EXPECT_DOUBLE_EQ(s1.stage_params, psi1);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::params), 2 * psi0);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::grads), 2 * psi0);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::optimizer), 8 * psi0);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::master_weights), 4 * psi0);
  EXPECT_DOUBLE_EQ(s0.model_states_bytes, 16 * psi0);
  EXPECT_DOUBLE_EQ(s1.model_states_bytes, 16 * psi1);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::loss_scale), 0);
  // min(p − s, m): 2 micro-batches on stage 0, 1 on stage 1.
  EXPECT_EQ(s0.max_in_flight, 2);
  EXPECT_EQ(s1.max_in_flight, 1);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::activations), 2 * kActBlock);
  EXPECT_DOUBLE_EQ(s1.at(TensorClass::activations), kActBlock + kActHead);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::gathered_params), 0);
  EXPECT_DOUBLE_EQ(s0.at(TensorClass::comm_buckets), 0);
  EXPECT_DOUBLE_EQ(s0.peak_bytes, 16 * psi0 + 2 * kActBlock);
  EXPECT_DOUBLE_EQ(s1.peak_bytes, 16 * psi1 + kActBlock + kActHead);
  EXPECT_DOUBLE_EQ(s0.capacity_bytes, units::gib_to_bytes(80));
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.worst_stage, 0);
}

TEST(Estimate, GPipeHoldsAllMicroBatches) {
  const auto s =
      tiny(2, 1, 2, R"(, "grad_accum": 4, "schedule": "gpipe", "mixed_precision": "bf16")");
  const MemoryReport r = estimate_memory(s);
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::activations), 4 * kActBlock);
  EXPECT_DOUBLE_EQ(r.stages[1].at(TensorClass::activations), 4 * (kActBlock + kActHead));
}

TEST(Estimate, Recomputation) {
  const std::string base = R"(, "grad_accum": 4, "mixed_precision": "bf16")";
  // Full: blocks keep their 64-byte input; the block being recomputed rebuilds 1248 − 64.
  auto r = estimate_memory(tiny(2, 1, 2, base + R"(, "recompute": "full")"));
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::activations), 2 * kActFull + (kActBlock - kActFull));
  EXPECT_DOUBLE_EQ(r.stages[1].at(TensorClass::activations), kActBlock);  // rebuilt block 2
  // Selective: 34·s·b·h kept, the attention core (5·a·s²·b = 160) rebuilt.
  r = estimate_memory(tiny(2, 1, 2, base + R"(, "recompute": "selective")"));
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::activations),
                   2 * kActSelective + (kActBlock - kActSelective));
  EXPECT_DOUBLE_EQ(r.stages[1].at(TensorClass::activations), kActSelective + kActHead);
}

TEST(Estimate, Fp32DoublesActivationsAndHasNoMaster) {
  const auto r = estimate_memory(tiny(2, 1, 2, R"(, "grad_accum": 4)"));
  const double psi0 = kEmbedding + kBlock;
  EXPECT_DOUBLE_EQ(r.stages[0].model_states_bytes, 16 * psi0);
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::params), 4 * psi0);
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::master_weights), 0);
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::activations), 2 * 2 * kActBlock);
  // The head keeps its input at 4 bytes and fp32 logits: 4·(8·4 + 4·16) = 384.
  EXPECT_DOUBLE_EQ(r.stages[1].at(TensorClass::activations), 2 * kActBlock + 384);
}

TEST(Estimate, Fp16KeepsTheLossScale) {
  const auto r = estimate_memory(tiny(2, 1, 2, R"(, "grad_accum": 4, "mixed_precision": "fp16")"));
  for (const RankMemory& rank : r.ranks) EXPECT_DOUBLE_EQ(rank.at(TensorClass::loss_scale), 8);
}

TEST(Estimate, Zero3HandWalk) {
  // dp 2, pp 1, 1F1B, one micro-batch, bf16. Units: embedding (gather 384), blocks (1744),
  // head (32); buckets the same. The walk's largest moment is block 2's backward: its gather
  // and block 1's prefetched one (3488), the head's bucket (32), both blocks' activations.
  const auto s = tiny(2, 2, 1, R"(, "sharding": "zero3", "mixed_precision": "bf16")");
  const RankMemory& r = estimate_memory(s).stages[0];
  const double psi = kEmbedding + 2 * kBlock + kHeadPp1;  // 1952
  EXPECT_EQ(r.shards, 2);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::params), psi);         // 2Ψ/2
  EXPECT_DOUBLE_EQ(r.at(TensorClass::grads), psi);          // 2Ψ/2
  EXPECT_DOUBLE_EQ(r.at(TensorClass::optimizer), 4 * psi);  // 8Ψ/2
  EXPECT_DOUBLE_EQ(r.at(TensorClass::master_weights), 2 * psi);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::activations), 2 * kActBlock);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::gathered_params), 2 * 2 * kBlock);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::comm_buckets), 2 * kHeadPp1);
  EXPECT_DOUBLE_EQ(r.peak_bytes, 8 * psi + 2 * kActBlock + 4 * kBlock + 2 * kHeadPp1);
}

TEST(Estimate, Zero2OneBucketStagesTheWholeGradientAtOnce) {
  // The tiny model's 2Ψ = 3904 bytes fit one 25 MiB bucket, so the backward is one op that
  // stages all of it at its end, when the activations (2816 at the forward's end) are freed.
  const auto r =
      estimate_memory(tiny(2, 2, 1, R"(, "sharding": "zero2", "mixed_precision": "bf16")"))
          .stages[0];
  const double psi = kEmbedding + 2 * kBlock + kHeadPp1;
  EXPECT_DOUBLE_EQ(r.at(TensorClass::gathered_params), 0);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::params), 2 * psi);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::activations), 0);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::comm_buckets), 2 * psi);
}

TEST(Estimate, Zero2SmallBucketsOverlapTheBackward) {
  // bucket_mb 0.001 (1048.576 bytes): buckets in backward order {head, block 2} = 1776,
  // {block 1} = 1744, {embedding} = 384, so the backward runs per unit. Block 1's backward
  // runs with its own activations (1248) while the first bucket is reduced: 3024 > 2816.
  const auto r = estimate_memory(tiny(2, 2, 1, R"(, "sharding": "zero2", "mixed_precision": "bf16",
                                               "bucket_mb": 0.001)"))
                     .stages[0];
  EXPECT_DOUBLE_EQ(r.at(TensorClass::activations), kActBlock);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::comm_buckets), 2 * (kHeadPp1 + kBlock));
}

TEST(Estimate, OneDataParallelRankGathersAndReducesNothing) {
  const auto r =
      estimate_memory(tiny(2, 1, 1, R"(, "sharding": "zero3", "mixed_precision": "bf16")"))
          .stages[0];
  EXPECT_DOUBLE_EQ(r.at(TensorClass::gathered_params), 0);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::comm_buckets), 0);
  EXPECT_DOUBLE_EQ(r.model_states_bytes, 16 * (kEmbedding + 2 * kBlock + kHeadPp1));
}

TEST(Estimate, Zero1AndDdpStageNoBuckets) {
  for (const char* sharding : {"none", "zero1"}) {
    const auto r = estimate_memory(tiny(2, 2, 1,
                                        std::string(R"(, "sharding": ")") + sharding +
                                            R"(", "mixed_precision": "bf16")"))
                       .stages[0];
    EXPECT_DOUBLE_EQ(r.at(TensorClass::comm_buckets), 0);
    EXPECT_DOUBLE_EQ(r.at(TensorClass::gathered_params), 0);
  }
}

TEST(Estimate, OffloadCountsHostBytes) {
  const auto r = estimate_memory(tiny(2, 2, 1, R"(, "sharding": "zero2", "mixed_precision": "bf16",
                                               "offload_optimizer": "cpu")"))
                     .stages[0];
  const double psi = kEmbedding + 2 * kBlock + kHeadPp1;
  EXPECT_DOUBLE_EQ(r.at(TensorClass::optimizer), 0);
  EXPECT_DOUBLE_EQ(r.at(TensorClass::master_weights), 0);
  EXPECT_DOUBLE_EQ(r.host_bytes, 12 * psi / 2);
  EXPECT_DOUBLE_EQ(r.model_states_bytes, 2 * psi + 2 * psi / 2);
}

TEST(Estimate, HybridShardShardsOverTheNode) {
  // 2 nodes × 4 GPUs, dp 8: HYBRID_SHARD shards over N = 4, FULL_SHARD over 8.
  const auto hybrid = estimate_memory(
      tiny(2, 8, 1, R"(, "sharding": "HYBRID_SHARD", "mixed_precision": "bf16")", 2));
  const auto full =
      estimate_memory(tiny(2, 8, 1, R"(, "sharding": "FULL_SHARD", "mixed_precision": "bf16")", 2));
  const double psi = kEmbedding + 2 * kBlock + kHeadPp1;
  EXPECT_EQ(hybrid.stages[0].shards, 4);
  EXPECT_EQ(full.stages[0].shards, 8);
  EXPECT_DOUBLE_EQ(hybrid.stages[0].model_states_bytes, 16 * psi / 4);
  EXPECT_DOUBLE_EQ(full.stages[0].model_states_bytes, 16 * psi / 8);
}

TEST(Estimate, InterleavedStagesFollowTheSchedule) {
  // 8 layers, pp 2, 2 chunks of 2 blocks, m 4: warm-up (p−s−1)·2 + (v−1)·p = 4 and 2, so 5
  // and 3 chunk-micro-batches in flight.
  const auto r = estimate_memory(tiny(
      8, 1, 2,
      R"(, "schedule": "interleaved", "chunks": 2, "grad_accum": 4, "mixed_precision": "bf16")"));
  EXPECT_EQ(r.stages[0].max_in_flight, 5);
  EXPECT_EQ(r.stages[1].max_in_flight, 3);
  EXPECT_DOUBLE_EQ(r.stages[0].at(TensorClass::activations), 5 * 2 * kActBlock);
  // Stage 0 holds embedding + blocks 1-2 and 5-6; stage 1 blocks 3-4 and 7-8 + head.
  EXPECT_DOUBLE_EQ(r.stages[0].stage_params, kEmbedding + 4 * kBlock);
  EXPECT_DOUBLE_EQ(r.stages[1].stage_params, 4 * kBlock + kHeadPp2);
}

TEST(Estimate, RanksCoverTheWorldStageMajor) {
  const auto r = estimate_memory(tiny(2, 4, 2, R"(, "grad_accum": 4, "mixed_precision": "bf16")"));
  ASSERT_EQ(r.ranks.size(), 8u);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(r.ranks[rank].rank, rank);
    EXPECT_EQ(r.ranks[rank].stage, rank / 4);
    EXPECT_EQ(r.ranks[rank].dp_index, rank % 4);
    EXPECT_DOUBLE_EQ(r.ranks[rank].peak_bytes, r.stages[rank / 4].peak_bytes);
  }
}

TEST(Estimate, ShortByWhenTheGpuIsTooSmall) {
  std::string text = R"({"model": {"params": 7.5e9, "layers": 32},
    "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": {"preset": "a100-80gb", "memory_GiB": 40},
                "intra_node": {"bandwidth_GBps": 300}},
    "strategy": {"dp": 8, "mixed_precision": "bf16", "recompute": "full"}})";
  const auto r = estimate_memory(scenario::parse_scenario(nlohmann::json::parse(text)));
  // DDP: 16Ψ = 120 GB of model states alone > 40 GiB.
  EXPECT_DOUBLE_EQ(r.stages[0].model_states_bytes, 16 * 7.5e9);
  EXPECT_FALSE(r.fits);
  EXPECT_FALSE(r.ranks[7].fits);
  EXPECT_LT(r.stages[0].headroom_bytes(), 0);
  const auto j = to_json(r);
  EXPECT_DOUBLE_EQ(j["short_by_bytes"].get<double>(),
                   r.stages[0].peak_bytes - units::gib_to_bytes(40));
}

TEST(Estimate, PeakIsTheSumOfClasses) {
  const auto r = estimate_memory(tiny(2, 2, 1, R"(, "sharding": "zero3", "mixed_precision": "fp16",
                                               "recompute": "selective", "grad_accum": 3)"));
  double sum = 0;
  for (double b : r.stages[0].bytes) sum += b;
  EXPECT_DOUBLE_EQ(r.stages[0].peak_bytes, sum);
}

TEST(Speed, LargestShapesAnswerWellUnder100ms) {
  // GPT-3 175B shapes on 512 GPUs: interleaved pp 8 with 512 micro-batches, and ZeRO-3 over
  // 512 ranks with 4096 micro-batches.
  const std::string model = R"("model": {"layers": 96, "hidden": 12288, "heads": 96,
                                          "vocab": 51200, "max_positions": 2048})";
  const std::string cluster = R"("cluster": {"preset": "dgx-a100-80gb", "nodes": 64})";
  const auto pipeline = scenario::parse_scenario(nlohmann::json::parse(
      "{" + model + "," + cluster +
      R"(, "strategy": {"dp": 64, "pp": 8, "schedule": "interleaved", "chunks": 4,
         "grad_accum": 512, "mixed_precision": "bf16", "sharding": "zero1"},
         "training": {"seq_len": 2048}})"));
  const auto zero3 = scenario::parse_scenario(nlohmann::json::parse(
      "{" + model + "," + cluster +
      R"(, "strategy": {"dp": 512, "grad_accum": 4096, "mixed_precision": "bf16",
         "sharding": "zero3", "recompute": "full"}, "training": {"seq_len": 2048}})"));
  const auto start = std::chrono::steady_clock::now();
  const auto a = estimate_memory(pipeline);
  const auto b = estimate_memory(zero3);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(a.ranks.size(), 512u);
  EXPECT_EQ(b.ranks.size(), 512u);
  EXPECT_LT(ms, 100.0);
}

}  // namespace
}  // namespace stratagem::memory

namespace stratagem::memory {
namespace {

// The schedule walk is bounded as the planner's plans are: pp 65,536 stages × 65,536
// micro-batches (8.6e9 schedule items) is refused naming the key, as `sim` refuses it, instead
// of walking for a minute; pp 65,536 with one micro-batch still runs.
TEST(Estimate, AScheduleBeyondThePlanBoundIsRefusedAsSimRefusesIt) {
  const nlohmann::json base = {
      {"model",
       {{"params", 1e9}, {"layers", 65536}, {"hidden", 128}, {"heads", 1}, {"vocab", 1000}}},
      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 8192}}},
      {"strategy", {{"dp", 1}, {"pp", 65536}, {"micro_batch_size", 1}}},
      {"training", {{"seq_len", 128}}}};
  EXPECT_EQ(estimate_memory(scenario::parse_scenario(base, "one")).stages.size(), 65536u);
  nlohmann::json many = base;
  many["training"]["global_batch"] = 65536;
  try {
    estimate_memory(scenario::parse_scenario(many, "many"));
    ADD_FAILURE() << "walked 8.6e9 schedule items";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.grad_accum");
    EXPECT_NE(std::string(e.what()).find("schedule items"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stratagem::memory
