#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/workload/schedule.hpp"
#include "engine/workload/stages.hpp"
#include "tests/plan/plan_test_util.hpp"

namespace stratagem {
namespace {

using plan::Collective;
using plan::Compute;
using plan::P2P;
using plan::Phase;
using plan::StepPlan;
using plan::TensorClass;
using plan::OpId;
using plan::kNoOp;

// Structural invariants every plan must satisfy.
void check_invariants(const StepPlan& p) {
  for (const auto& op : p.ops) {
    for (plan::OpId d : p.deps_of(op)) {
      ASSERT_LT(d, op.id) << "deps must point backwards (acyclic by construction)";
      ASSERT_EQ(p.ops[d].rank, op.rank) << "deps never cross ranks";
    }
  }
  for (const auto& t : p.transfers) {
    if (p.ranks[t.src].built) {
      ASSERT_NE(t.send, plan::kNoOp);
    }
    if (p.ranks[t.dst].built) {
      ASSERT_NE(t.recv, plan::kNoOp);
    }
  }
  for (const auto& inst : p.collectives) {
    int built = 0;
    for (int r : p.groups[inst.group].ranks) built += p.ranks[r].built ? 1 : 0;
    ASSERT_EQ(static_cast<int>(inst.ops.size()), built) << p.groups[inst.group].label;
  }
}

// Peak activation bytes of a rank, walking its compute stream in order (activation effects
// only sit on compute ops, so stream order gives the exact peak).
double activation_peak(const StepPlan& p, int rank) {
  double cur = 0, peak = 0;
  for (plan::OpId id : p.ranks[rank].streams[0]) {
    for (const auto& e : p.effects_of(p.ops[id])) {
      if (e.cls != TensorClass::activations) continue;
      cur += e.bytes;
      peak = std::max(peak, cur);
    }
  }
  EXPECT_NEAR(cur, 0.0, 1.0) << "every activation allocated is freed";
  return peak;
}

TEST(Builder, EveryShippedScenarioBuilds) {
  for (const auto& name : scenario::shipped_scenario_names()) {
    SCOPED_TRACE(name);
    const auto s = scenario::load_scenario(name);
    const auto p = plan::build_plan(s);
    check_invariants(p);
    EXPECT_GT(p.ops.size(), 0u);
  }
}

TEST(Builder, DdpBucketsAllReduceOnlyAfterTheLastMicroBatch) {
  const auto s = test::small_scenario(
      {{"dp", 8}, {"micro_batch_size", 2}, {"grad_accum", 4}, {"mixed_precision", "bf16"}});
  const auto p = plan::build_plan(s);
  check_invariants(p);
  // A block has 12h²+13h = 12,595,200 params = 25.19 MB in bf16, under the 25 MiB
  // (26.21 MB) cap, so buckets close after the second block: {head, 16, 15}, {14, 13}, ...,
  // {2, 1}, then the embedding (34.9M params) alone: 1 + 7 + 1 = 9 buckets.
  int all_reduces = 0;
  for (plan::OpId id : p.ranks[0].streams[1]) {
    const auto& c = std::get<Collective>(p.ops[id].payload);
    EXPECT_EQ(c.kind, plan::CollectiveKind::all_reduce);
    ++all_reduces;
    // Each bucket's all-reduce depends on a backward of the last micro-batch.
    const auto deps = p.deps_of(p.ops[id]);
    ASSERT_EQ(deps.size(), 1u);
    const auto& producer = std::get<Compute>(p.ops[deps[0]].payload);
    EXPECT_EQ(producer.phase, Phase::backward);
    EXPECT_EQ(producer.microbatch, 3);
  }
  EXPECT_EQ(all_reduces, 9);
  double synced = 0;
  for (plan::OpId id : p.ranks[0].streams[1])
    synced += std::get<Collective>(p.ops[id].payload).bytes;
  double params = 0;
  for (const auto& u : p.layout.units) params += u.params;
  EXPECT_DOUBLE_EQ(synced, 2.0 * params);  // every gradient is all-reduced exactly once
}

TEST(Builder, OneBucketMeansOneAllReduceAfterBackward) {
  const auto s = test::small_scenario({{"dp", 8}, {"bucket_mb", 1e6}});
  const auto p = plan::build_plan(s);
  ASSERT_EQ(p.ranks[0].streams[1].size(), 1u);
}

TEST(Builder, Zero3MovesOneAndAHalfTimesDdp) {
  // Untied: a tied head gathers the word table again (TiedHeadUnderZero3GathersTheWordTable).
  auto untied = [](const nlohmann::json& strategy) {
    auto s = test::small_scenario(strategy);
    s.model.tied_embeddings = false;
    return plan::build_plan(s);
  };
  const auto ddp = untied({{"dp", 8}, {"mixed_precision", "bf16"}});
  const auto z1 = untied({{"dp", 8}, {"mixed_precision", "bf16"}, {"sharding", "zero1"}});
  const auto z2 = untied({{"dp", 8}, {"mixed_precision", "bf16"}, {"sharding", "zero2"}});
  const auto z3 = untied({{"dp", 8}, {"mixed_precision", "bf16"}, {"sharding", "zero3"}});
  const auto fsdp = untied({{"dp", 8}, {"mixed_precision", "bf16"}, {"sharding", "FULL_SHARD"}});
  const double base = test::wire_bytes(ddp, 0);
  EXPECT_GT(base, 0);
  EXPECT_NEAR(test::wire_bytes(z1, 0) / base, 1.0, 1e-12);
  EXPECT_NEAR(test::wire_bytes(z2, 0) / base, 1.0, 1e-12);
  EXPECT_NEAR(test::wire_bytes(z3, 0) / base, 1.5, 1e-12);
  EXPECT_NEAR(test::wire_bytes(fsdp, 0) / base, 1.5, 1e-12);
}

TEST(Builder, ShardGradOpGathersOncePerMicroBatch) {
  const auto full = plan::build_plan(
      test::small_scenario({{"dp", 8}, {"sharding", "FULL_SHARD"}, {"grad_accum", 2}}));
  const auto grad_op = plan::build_plan(
      test::small_scenario({{"dp", 8}, {"sharding", "SHARD_GRAD_OP"}, {"grad_accum", 2}}));
  const auto units = static_cast<std::size_t>(full.layout.units.size());
  EXPECT_EQ(full.ranks[0].streams[2].size(), 2 * 2 * units);  // forward + backward, 2 mbs
  EXPECT_EQ(grad_op.ranks[0].streams[2].size(), 2 * units);   // forward only, kept
}

TEST(Builder, ActivationsInFlightFollowTheSchedule) {
  const int p = 4, m = 8;
  auto pipe = [&](const char* schedule) {
    return plan::build_plan(
        test::small_scenario({{"dp", 2}, {"pp", p}, {"schedule", schedule}, {"grad_accum", m}}));
  };
  const auto gpipe = pipe("gpipe");
  const auto ofob = pipe("1f1b");
  for (int stage = 0; stage < p; ++stage) {
    const int rank = gpipe.layout.rank_of(stage, 0);
    // Per micro-batch activations of this stage (one forward op's allocation).
    double per_mb = 0;
    for (const auto& e : gpipe.effects_of(gpipe.ops[gpipe.ranks[rank].streams[0][0]])) {
      if (e.cls == TensorClass::activations) per_mb += e.bytes;
    }
    EXPECT_DOUBLE_EQ(activation_peak(gpipe, rank), m * per_mb) << "GPipe holds m";
    EXPECT_DOUBLE_EQ(activation_peak(ofob, rank), std::min(p - stage, m) * per_mb)
        << "1F1B holds min(p−s, m) on stage " << stage;
  }
}

TEST(Builder, PipelineSendsPairWithRecvs) {
  const auto p = plan::build_plan(test::small_scenario(
      {{"dp", 2}, {"pp", 4}, {"schedule", "interleaved"}, {"chunks", 2}, {"grad_accum", 8}}));
  check_invariants(p);
  // 2 directions × (virtual stages − 1) boundaries × m micro-batches, for replica 0 only
  // (folded: the other replica is not built).
  EXPECT_EQ(p.transfers.size(), static_cast<std::size_t>(2 * (4 * 2 - 1) * 8));
}

TEST(Builder, FoldingBuildsOnlyReplicaZeroWithTheSameOps) {
  const auto s =
      test::small_scenario({{"dp", 4}, {"pp", 2}, {"grad_accum", 4}, {"sharding", "zero1"}});
  const auto folded = plan::build_plan(s, {.fold = true});
  const auto full = plan::build_plan(s, {.fold = false});
  EXPECT_TRUE(folded.folded);
  EXPECT_EQ(folded.built_ranks(), (std::vector<int>{0, 4}));
  EXPECT_EQ(full.built_ranks().size(), 8u);
  for (int r : {0, 4}) {
    for (int st = 0; st < plan::kStreamCount; ++st) {
      EXPECT_EQ(folded.ranks[r].streams[st].size(), full.ranks[r].streams[st].size());
    }
  }
  EXPECT_EQ(folded.ranks[5].representative, 4);
  EXPECT_EQ(folded.ranks[5].initial, full.ranks[5].initial);
}

TEST(Builder, Fp16AddsFoundInfAllReduceAndBf16DoesNot) {
  auto count_found_inf = [](const StepPlan& p) {
    int n = 0;
    for (const auto& op : p.ops) {
      if (const auto* c = std::get_if<Collective>(&op.payload)) {
        n += c->purpose == plan::CommPurpose::found_inf ? 1 : 0;
      }
    }
    return n;
  };
  const auto fp16 =
      plan::build_plan(test::small_scenario({{"dp", 8}, {"mixed_precision", "fp16"}}));
  const auto bf16 =
      plan::build_plan(test::small_scenario({{"dp", 8}, {"mixed_precision", "bf16"}}));
  EXPECT_EQ(count_found_inf(fp16), 1);  // folded: one built rank
  EXPECT_EQ(count_found_inf(bf16), 0);
  EXPECT_EQ(fp16.ranks[0].initial[static_cast<int>(TensorClass::loss_scale)], 8.0);
}

TEST(Builder, FullRecomputeRebuildsOneLayerAtATime) {
  const auto none = plan::build_plan(test::small_scenario({{"dp", 8}}));
  const auto full = plan::build_plan(test::small_scenario({{"dp", 8}, {"recompute", "full"}}));
  int recomputes = 0;
  for (plan::OpId id : full.ranks[0].streams[0]) {
    const auto* c = std::get_if<Compute>(&full.ops[id].payload);
    if (c && c->phase == Phase::recompute) ++recomputes;
  }
  EXPECT_EQ(recomputes, 16);
  const auto& block = full.layout.units[1];
  // The head's backward runs (and frees the head's activations) before block 16 is rebuilt,
  // so the peak is the larger of: all checkpoints + the head, or all checkpoints + one
  // rebuilt block.
  const double expect = 16 * block.act_bytes + std::max(full.layout.units.back().act_bytes,
                                                        block.full_act_bytes - block.act_bytes);
  EXPECT_DOUBLE_EQ(activation_peak(full, 0), expect);
  EXPECT_LT(activation_peak(full, 0), activation_peak(none, 0));
}

TEST(Builder, TiedEmbeddingsSyncAcrossFirstAndLastStage) {
  const auto p = plan::build_plan(test::small_scenario({{"dp", 2}, {"pp", 4}, {"grad_accum", 4}}));
  int tied = 0;
  for (const auto& op : p.ops) {
    if (const auto* c = std::get_if<Collective>(&op.payload)) {
      if (c->purpose == plan::CommPurpose::tied_embedding) {
        ++tied;
        EXPECT_EQ(p.groups[c->group].ranks, (std::vector<int>{0, 6}));
      }
    }
  }
  EXPECT_EQ(tied, 2);  // stage 0 and stage 3 of replica 0
}

TEST(Builder, TiedHeadUnderZero3GathersTheWordTable) {
  // One stage, parameters resharded after each use: the head's gathers bring the table it
  // borrows from the embedding, and free it with its own parameters.
  for (const char* sharding : {"zero3", "FULL_SHARD"}) {
    const auto p = plan::build_plan(
        test::small_scenario({{"dp", 8}, {"mixed_precision", "bf16"}, {"sharding", sharding}}));
    const auto& head = p.layout.units.back();
    const double table = 32000.0 * 1024.0;
    EXPECT_DOUBLE_EQ(head.gather_params, head.params + table) << sharding;
    int head_gathers = 0;
    for (OpId id : p.ranks[0].streams[static_cast<int>(plan::Stream::gather)]) {
      const auto& c = std::get<Collective>(p.ops[id].payload);
      if (c.unit_begin == static_cast<int>(p.layout.units.size()) - 1) {
        ++head_gathers;
        EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (head.params + table));
      }
    }
    EXPECT_EQ(head_gathers, 2) << sharding;  // forward and backward of the one micro-batch
  }
  // Kept from forward to backward (SHARD_GRAD_OP), the embedding's gather serves the head.
  const auto kept = plan::build_plan(test::small_scenario({{"dp", 8}, {"sharding", "SHARD_GRAD_OP"}}));
  EXPECT_DOUBLE_EQ(kept.layout.units.back().gather_params, kept.layout.units.back().params);
}

TEST(Builder, ParamGathersAreEmittedRightAfterTheComputeTheyWaitFor) {
  // Backends issue a rank's collectives in op order: a gather emitted after a later unit's
  // reduce-scatter could not be prefetched. Between a gather and the compute op it waits for,
  // the rank emits only collectives that wait for that same op.
  for (int prefetch : {0, 1, 2}) {
    for (const char* sharding : {"zero3", "FULL_SHARD", "SHARD_GRAD_OP"}) {
      const auto p = plan::build_plan(test::small_scenario(
          {{"dp", 8}, {"sharding", sharding}, {"grad_accum", 2}, {"prefetch", prefetch}}));
      int checked = 0;
      for (OpId id : p.ranks[0].streams[static_cast<int>(plan::Stream::gather)]) {
        const auto deps = p.deps_of(p.ops[id]);
        if (deps.empty()) continue;
        ASSERT_EQ(deps.size(), 1u);
        for (OpId between = deps[0] + 1; between < id; ++between) {
          const auto& op = p.ops[between];
          if (op.rank != 0 || !std::holds_alternative<Collective>(op.payload)) continue;
          const auto d = p.deps_of(op);
          EXPECT_NE(std::find(d.begin(), d.end(), deps[0]), d.end())
              << sharding << " prefetch " << prefetch << ": op " << between << " before gather "
              << id;
        }
        ++checked;
      }
      EXPECT_GT(checked, 0);
    }
  }
}

TEST(Builder, TiedTableSyncsBeforeTheZero1ReduceScatterOfItsBucket) {
  const auto p = plan::build_plan(test::small_scenario(
      {{"dp", 2}, {"pp", 4}, {"grad_accum", 4}, {"sharding", "zero1"}}));
  const int head = static_cast<int>(p.layout.units.size()) - 1;
  for (int rank : {0, 6}) {  // stage 0 (embedding) and stage 3 (head) of replica 0
    const int tied_unit = rank == 0 ? 0 : head;
    OpId tied = kNoOp, rs = kNoOp;
    for (const auto& op : p.ops) {
      if (op.rank != rank) continue;
      const auto* c = std::get_if<Collective>(&op.payload);
      if (!c) continue;
      if (c->purpose == plan::CommPurpose::tied_embedding) tied = op.id;
      if (c->kind == plan::CollectiveKind::reduce_scatter && c->unit_begin <= tied_unit &&
          tied_unit < c->unit_end) {
        rs = op.id;
      }
    }
    ASSERT_NE(tied, kNoOp);
    ASSERT_NE(rs, kNoOp);
    const auto deps = p.deps_of(p.ops[rs]);
    EXPECT_NE(std::find(deps.begin(), deps.end(), tied), deps.end()) << "rank " << rank;
  }
}

TEST(Builder, HybridShardReduceScattersInNodeAndAllReducesAcrossNodes) {
  nlohmann::json j = {{"model", {{"layers", 4}, {"hidden", 256}, {"heads", 4}, {"vocab", 1000}}},
                      {"cluster",
                       {{"nodes", 2},
                        {"gpus_per_node", 4},
                        {"gpu", "a100-80gb"},
                        {"intra_node", {{"bandwidth_GBps", 300}}},
                        {"inter_node", {{"bandwidth_GBps", 25}}}}},
                      {"strategy", {{"dp", 8}, {"sharding", "HYBRID_SHARD"}}},
                      {"training", {{"seq_len", 128}}}};
  const auto p = plan::build_plan(scenario::parse_scenario(j), {.fold = false});
  bool saw_rs = false, saw_ar = false;
  for (plan::OpId id : p.ranks[5].streams[1]) {
    const auto& c = std::get<Collective>(p.ops[id].payload);
    if (c.kind == plan::CollectiveKind::reduce_scatter) {
      saw_rs = true;
      EXPECT_EQ(p.groups[c.group].ranks, (std::vector<int>{4, 5, 6, 7}));
      EXPECT_TRUE(p.groups[c.group].intra_node);
    } else {
      saw_ar = true;
      EXPECT_EQ(p.groups[c.group].ranks, (std::vector<int>{1, 5}));
      EXPECT_FALSE(p.groups[c.group].intra_node);
    }
  }
  EXPECT_TRUE(saw_rs && saw_ar);
}

TEST(Builder, ScheduleOrdersMatchMegatron) {
  // 1F1B, p=4, stage 1, m=4: two warm-up forwards, then F/B pairs, then cool-down.
  const auto o = workload::schedule_order(scenario::Schedule::one_f_one_b, 4, 1, 1, 4);
  std::string s;
  for (const auto& i : o) s += (i.forward ? "F" : "B") + std::to_string(i.microbatch) + " ";
  EXPECT_EQ(s, "F0 F1 F2 B0 F3 B1 B2 B3 ");
  // Interleaved p=2, v=2, m=4, stage 0: warm-up (2−0−1)·2 + (2−1)·2 = 4.
  const auto io = workload::schedule_order(scenario::Schedule::interleaved, 2, 0, 2, 4);
  std::string t;
  for (const auto& i : io) {
    t += (i.forward ? "F" : "B") + std::to_string(i.chunk) + "." + std::to_string(i.microbatch) +
         " ";
  }
  EXPECT_EQ(t, "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 B1.2 B1.3 B0.2 B0.3 ");
}

TEST(Builder, SplitStagesPutsEmbeddingFirstAndHeadLast) {
  const auto split = workload::split_stages(10, 4, 1);
  // 10 blocks over 4 stages: 3,3,2,2; units 0 and 11 are embedding and head.
  EXPECT_EQ(split[0][0], (std::pair<int, int>{0, 4}));
  EXPECT_EQ(split[1][0], (std::pair<int, int>{4, 7}));
  EXPECT_EQ(split[2][0], (std::pair<int, int>{7, 9}));
  EXPECT_EQ(split[3][0], (std::pair<int, int>{9, 12}));
}

// Megatron-LM's account_for_embedding/loss_in_pipeline_split: Llama 3.1 405B's 126 blocks plus
// embedding and loss are 128 layer-equivalents, 2 per virtual stage of pp 8 × 8 chunks: the
// first holds the embedding and block 1, the last block 126 and the head; without the flags
// 126 blocks do not divide by the 64 virtual stages and an interleaved scenario is refused.
TEST(Builder, SplitStagesCountsEmbeddingAndLossAsLayersAsMegatron) {
  const auto split = workload::split_stages(126, 8, 8, true, true);
  EXPECT_EQ(split[0][0], (std::pair<int, int>{0, 2}));     // embedding, block 1
  EXPECT_EQ(split[1][0], (std::pair<int, int>{2, 4}));     // blocks 2, 3
  EXPECT_EQ(split[7][7], (std::pair<int, int>{126, 128}));  // block 126, head
  int next = 0;
  for (int vs = 0; vs < 64; ++vs) {
    const auto [b, e] = split[vs % 8][vs / 8];
    EXPECT_EQ(b, next) << vs;
    EXPECT_EQ(e - b, 2) << vs;  // every virtual stage holds two layer-equivalents
    next = e;
  }
  // Only the embedding counted: 11 over 4 stages = 3, 3, 3, 2 slots.
  const auto lead = workload::split_stages(10, 4, 1, true, false);
  EXPECT_EQ(lead[0][0], (std::pair<int, int>{0, 3}));  // embedding + 2 blocks
  EXPECT_EQ(lead[3][0], (std::pair<int, int>{9, 12}));

  nlohmann::json j = {
      {"model", {{"layers", 126}, {"hidden", 1024}, {"heads", 8}, {"ffn_hidden", 4096},
                 {"vocab", 32000}}},
      {"cluster", "dgx-h100"},
      {"strategy", {{"pp", 8}, {"schedule", "interleaved"}, {"chunks", 8},
                    {"mixed_precision", "bf16"}, {"grad_accum", 16}}},
      {"training", {{"seq_len", 512}}}};
  try {
    scenario::parse_scenario(j);
    FAIL() << "126 blocks over 64 virtual stages accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.chunks");
  }
  j["strategy"]["account_for_embedding_in_pipeline_split"] = true;
  j["strategy"]["account_for_loss_in_pipeline_split"] = true;
  const auto s = scenario::parse_scenario(j);
  const auto p = plan::build_plan(s);
  EXPECT_EQ(p.layout.stage_chunk_units, split);
  EXPECT_EQ(scenario::to_json(s.strategy).value("account_for_loss_in_pipeline_split", false), true);
  // Without a pipeline there is nothing to count them in.
  j["strategy"] = {{"dp", 8}, {"account_for_loss_in_pipeline_split", true}};
  try {
    scenario::parse_scenario(j);
    FAIL() << "accepted without a pipeline";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.account_for_loss_in_pipeline_split");
  }
}

}  // namespace
}  // namespace stratagem

namespace stratagem {
namespace {

TEST(Builder, QuickFormModelWithParameterlessUnitsBuilds) {
  // {"params", "layers"} models have no embedding or head parameters: those units join no
  // gradient bucket, which per-unit backward ops must tolerate.
  nlohmann::json j = {
      {"model", {{"params", 1e9}, {"layers", 8}}},
      {"cluster", "dgx-a100-80gb"},
      {"strategy", {{"dp", 8}, {"recompute", "selective"}, {"mixed_precision", "bf16"}}},
      {"training", {{"seq_len", 512}}}};
  const auto p = plan::build_plan(scenario::parse_scenario(j));
  int all_reduces = 0;
  for (plan::OpId id : p.ranks[0].streams[1]) {
    all_reduces +=
        std::get<plan::Collective>(p.ops[id].payload).kind == plan::CollectiveKind::all_reduce;
  }
  EXPECT_GT(all_reduces, 0);
}

}  // namespace
}  // namespace stratagem

namespace stratagem {
namespace {

TEST(Builder, InterleavedBucketSpanningChunksSyncsOnceAfterBoth) {
  const auto p = plan::build_plan(test::small_scenario({{"dp", 4},
                                                        {"pp", 2},
                                                        {"schedule", "interleaved"},
                                                        {"chunks", 2},
                                                        {"grad_accum", 4},
                                                        {"bucket_mb", 1e6}}));
  for (int stage = 0; stage < 2; ++stage) {
    const int rank = p.layout.rank_of(stage, 0);
    int grad_syncs = 0;
    for (plan::OpId id : p.ranks[rank].streams[1]) {
      const auto& c = std::get<plan::Collective>(p.ops[id].payload);
      if (c.purpose != plan::CommPurpose::grad_sync) continue;
      ++grad_syncs;
      // It waits for the last backward of the rank: both chunks' gradients are final.
      plan::OpId last_backward = plan::kNoOp;
      for (plan::OpId cid : p.ranks[rank].streams[0]) {
        const auto& x = std::get<plan::Compute>(p.ops[cid].payload);
        if (x.phase == plan::Phase::backward) last_backward = cid;
      }
      EXPECT_EQ(p.deps_of(p.ops[id])[0], last_backward);
    }
    EXPECT_EQ(grad_syncs, 1) << "stage " << stage;
  }
}

}  // namespace
}  // namespace stratagem
