// Context parallelism (Megatron-LM CP, torchtitan ring attention): the rank order tp, cp, dp,
// pp and its groups, the ring's K/V bytes per layer and phase, its overlap with the attention
// core, gradients reduced over dp × cp, each rank's share of the work, and folded == unfolded.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/plan/builder.hpp"
#include "engine/workload/context_ring.hpp"
#include "sim/simulator.hpp"
#include "tests/plan/plan_test_util.hpp"

namespace stratagem {
namespace {

using plan::CollectiveKind;
using plan::Phase;

using test::group_named;

nlohmann::json cp_strategy(int dp, int cp, int tp = 1) {
  return {{"dp", dp}, {"cp", cp}, {"tp", tp}, {"grad_accum", 1}, {"mixed_precision", "bf16"}};
}

TEST(ContextParallel, MeshFollowsMegatronRankOrder) {
  // tp 2 × cp 2 × dp 2: rank = (d·2 + k)·2 + t (parallel_state's order tp-cp-dp-pp).
  const auto p = plan::build_plan(test::small_scenario(cp_strategy(2, 2, 2)), {.fold = false});
  ASSERT_EQ(p.layout.world, 8);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(p.layout.coords[r].tp, r % 2);
    EXPECT_EQ(p.layout.coords[r].cp, (r / 2) % 2);
    EXPECT_EQ(p.layout.coords[r].dp, r / 4);
    EXPECT_EQ(p.layout.rank_of(0, r / 4, r % 2, (r / 2) % 2), r);
  }
  EXPECT_EQ(group_named(p, "cp(stage 0, dp 0, tp 0)").ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(group_named(p, "cp(stage 0, dp 1, tp 1)").ranks, (std::vector<int>{5, 7}));
  EXPECT_EQ(group_named(p, "tp(stage 0, dp 1, cp 0)").ranks, (std::vector<int>{4, 5}));
  // Gradients are reduced over every data- and context-parallel rank of a TP index.
  EXPECT_EQ(group_named(p, "dp×cp(stage 0, tp 0)").ranks, (std::vector<int>{0, 2, 4, 6}));
}

struct Ring {
  std::map<std::pair<Phase, CollectiveKind>, int> count;
  std::map<std::pair<Phase, CollectiveKind>, double> bytes;
};

Ring ring_of(const plan::StepPlan& p, int rank) {
  Ring out;
  Phase phase = Phase::forward;
  for (const auto& op : p.ops) {
    if (op.rank != rank) continue;
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) phase = c->phase;
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c || c->purpose != plan::CommPurpose::context_parallel) continue;
    EXPECT_EQ(op.stream, plan::Stream::cp);
    EXPECT_EQ(p.groups[c->group].ranks.size(), 2u);
    out.count[{phase, c->kind}] += 1;
    out.bytes[{phase, c->kind}] += c->bytes;
  }
  return out;
}

TEST(ContextParallel, RingBytesPerLayerAndPhase) {
  // s 1024, b 1, h = kv 1024, bf16: K and V of the whole sequence are 2·1024·1024·2 = 4 MiB;
  // each of the cp − 1 = 1 ring steps moves one rank's half, 2 MiB.
  const auto s = test::small_scenario(cp_strategy(4, 2));
  EXPECT_DOUBLE_EQ(workload::context_kv_bytes(s), 4.0 * 1024 * 1024);
  const auto p = plan::build_plan(s);
  const Ring r = ring_of(p, 0);
  using K = CollectiveKind;
  const double kv = 4.0 * 1024 * 1024;
  EXPECT_EQ(r.count.at({Phase::forward, K::all_gather}), 16);  // one per block
  EXPECT_DOUBLE_EQ(r.bytes.at({Phase::forward, K::all_gather}), 16 * kv);
  EXPECT_EQ(r.count.at({Phase::backward, K::all_gather}), 16);      // K/V again
  EXPECT_EQ(r.count.at({Phase::backward, K::reduce_scatter}), 16);  // dK/dV home
  EXPECT_DOUBLE_EQ(r.bytes.at({Phase::backward, K::reduce_scatter}), 16 * kv);
  EXPECT_EQ(r.count.size(), 3u);
  // One ring step on the wire per layer and direction: (n − 1)/n · S = S/2 = 2 MiB.
  // Full recomputation replays the forward's exchange before each block's backward.
  auto full = cp_strategy(4, 2);
  full["recompute"] = "full";
  const Ring f = ring_of(plan::build_plan(test::small_scenario(full)), 0);
  EXPECT_EQ(f.count.at({Phase::recompute, K::all_gather}), 16);
}

TEST(ContextParallel, TheExchangeRunsAlongsideTheAttentionCore) {
  const auto p = plan::build_plan(test::small_scenario(cp_strategy(4, 2)));
  int checked = 0;
  for (const auto& op : p.ops) {
    if (op.rank != 0 || op.stream != plan::Stream::cp) continue;
    // The ring waits for the QKV piece only; the core after it does not wait for the ring;
    // the piece after the core waits for both.
    const auto deps = p.deps_of(op);
    ASSERT_EQ(deps.size(), 1u);
    const plan::Op& qkv = p.ops[deps[0]];
    EXPECT_EQ(qkv.stream, plan::Stream::compute);
    const auto ring = op.id;
    bool core_found = false, join_found = false;
    for (const auto& later : p.ops) {
      if (later.rank != 0 || later.stream != plan::Stream::compute || later.id <= ring) continue;
      const auto d = p.deps_of(later);
      const bool waits = std::find(d.begin(), d.end(), ring) != d.end();
      const auto& c = std::get<plan::Compute>(later.payload);
      if (!core_found) {
        EXPECT_FALSE(waits);
        EXPECT_GT(c.attention_flops, 0);  // the fused core
        EXPECT_EQ(c.flops, 0);
        core_found = true;
        continue;
      }
      join_found = waits;
      break;
    }
    EXPECT_TRUE(core_found && join_found);
    if (++checked == 3) break;
  }
  EXPECT_EQ(checked, 3);
}

TEST(ContextParallel, EachRankComputesItsShareAndGradientsSyncOverDpTimesCp) {
  auto flops = [](const plan::StepPlan& p) {
    double gemm = 0, attention = 0;
    for (const auto& op : p.ops) {
      const auto* c = std::get_if<plan::Compute>(&op.payload);
      if (op.rank == 0 && c && c->phase != Phase::optimizer) {
        gemm += c->flops;
        attention += c->attention_flops;
      }
    }
    return std::pair{gemm, attention};
  };
  // Same samples per rank: dp 8 with mbs 1 against dp 4 × cp 2 (each rank half a sequence).
  const auto one = plan::build_plan(test::small_scenario(cp_strategy(8, 1)));
  const auto two = plan::build_plan(test::small_scenario(cp_strategy(4, 2)));
  EXPECT_NEAR(flops(two).first, flops(one).first / 2, flops(one).first * 1e-12);
  EXPECT_NEAR(flops(two).second, flops(one).second / 2, flops(one).second * 1e-12);
  for (const auto& op : two.ops) {
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (c && c->purpose == plan::CommPurpose::grad_sync) {
      EXPECT_EQ(two.groups[c->group].ranks.size(), 8u);  // dp 4 × cp 2
    }
  }
}

TEST(ContextParallel, FoldedAndUnfoldedAgree) {
  for (const char* sharding : {"none", "FULL_SHARD"}) {
    auto st = cp_strategy(2, 2, 2);
    st["sharding"] = sharding;
    st["grad_accum"] = 2;
    const auto s = test::small_scenario(st);
    const auto folded = plan::build_plan(s);
    const auto full = plan::build_plan(s, {.fold = false});
    EXPECT_EQ(folded.built_ranks().size(), 1u);
    const auto models = sim::make_cost_models(s);
    const auto a = sim::Simulator().run(folded, models);
    const auto b = sim::Simulator().run(full, models);
    EXPECT_DOUBLE_EQ(a.metrics.step_time_s, b.metrics.step_time_s) << sharding;
    for (int r = 0; r < 8; ++r) {
      EXPECT_DOUBLE_EQ(a.resolved(r).peak_memory_bytes, b.ranks[r].peak_memory_bytes);
    }
  }
}

}  // namespace
}  // namespace stratagem
