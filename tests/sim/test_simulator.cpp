// The simulator on hand-built plans with exact cost models.
#include <gtest/gtest.h>

#include "engine/result/result.hpp"
#include "engine/scenario/error.hpp"
#include "sim/simulator.hpp"
#include "tests/sim/plan_maker.hpp"

namespace stratagem::test {
namespace {

using plan::CollectiveKind;
using plan::TensorClass;

const result::Span& span_of(const result::RunResult& r, plan::OpId op) {
  for (const auto& rank : r.ranks) {
    for (const auto& s : rank.spans) {
      if (s.op == op) return s;
    }
  }
  throw std::runtime_error("no span for op " + std::to_string(op));
}

constexpr double kGB = 1e9;  // 1 GB at 1 GB/s: one second

TEST(Simulator, ComputeOpsOnAStreamRunInOrder) {
  PlanMaker pm(1);
  const auto a = pm.compute(0, 1.5);
  const auto b = pm.compute(0, 0.25);
  const auto r = sim::Simulator().run(pm.finish(), free_comm_models());
  EXPECT_EQ(span_of(r, a).end_s, 1.5);
  EXPECT_EQ(span_of(r, b).start_s, 1.5);
  EXPECT_EQ(span_of(r, b).end_s, 1.75);
  EXPECT_EQ(r.metrics.step_time_s, 1.75);
}

TEST(Simulator, TwoConcurrentFlowsOnOneLinkEachTakeTwiceAsLong) {
  PlanMaker pm(3);
  const auto [s1, r1] = pm.p2p(0, 1, kGB);  // both leave rank 0 over its NVLink port
  const auto [s2, r2] = pm.p2p(0, 2, kGB);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0, kGB, 0));
  EXPECT_EQ(span_of(r, s1).start_s, 0.0);
  EXPECT_EQ(span_of(r, s1).end_s, 2.0);
  EXPECT_EQ(span_of(r, r1).end_s, 2.0);
  EXPECT_EQ(span_of(r, s2).end_s, 2.0);
}

TEST(Simulator, FlowsIntoOneReceiverShareItsLink) {
  PlanMaker pm(3);
  const auto [s1, r1] = pm.p2p(0, 2, kGB);
  const auto [s2, r2] = pm.p2p(1, 2, kGB);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0, kGB, 0));
  EXPECT_EQ(span_of(r, r1).end_s, 2.0);
  EXPECT_EQ(span_of(r, r2).end_s, 2.0);
}

TEST(Simulator, FlowsOnDisjointLinksDoNotSlowEachOther) {
  PlanMaker pm(4);
  const auto [s1, r1] = pm.p2p(0, 1, kGB);
  const auto [s2, r2] = pm.p2p(2, 3, kGB);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0, kGB, 0));
  EXPECT_EQ(span_of(r, r1).end_s, 1.0);
  EXPECT_EQ(span_of(r, r2).end_s, 1.0);
}

TEST(Simulator, LaterFlowSpeedsUpWhenTheOtherEnds) {
  PlanMaker pm(3);
  const auto [s1, r1] = pm.p2p(0, 1, kGB);
  const auto wait = pm.compute(0, 0.5);
  const auto [s2, r2] = pm.p2p(0, 2, kGB, {wait});
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0, kGB, 0));
  // Alone until 0.5 (half done), then half rate: the rest takes 1 s, ends at 1.5. The second
  // did 0.5 GB by then at half rate and finishes the other 0.5 GB alone: 2.0.
  EXPECT_EQ(span_of(r, s1).end_s, 1.5);
  EXPECT_EQ(span_of(r, s2).start_s, 0.5);
  EXPECT_EQ(span_of(r, s2).end_s, 2.0);
}

TEST(Simulator, LatencyIsAddedAndNotShared) {
  PlanMaker pm(3);
  const auto [s1, r1] = pm.p2p(0, 1, kGB);
  const auto [s2, r2] = pm.p2p(0, 2, kGB);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0.25, kGB, 0));
  EXPECT_EQ(span_of(r, s1).end_s, 2.25);
  EXPECT_EQ(span_of(r, s2).end_s, 2.25);
}

TEST(Simulator, InterNodeTransfersUseTheNic) {
  PlanMaker pm(4, /*gpus_per_node=*/2);
  const auto [s1, r1] = pm.p2p(1, 2, kGB);  // node 0 → node 1
  const auto r = sim::Simulator().run(pm.finish(), exact_models(8 * kGB, 0, kGB / 4, 0.5));
  EXPECT_EQ(span_of(r, r1).end_s, 4.5);
}

TEST(Simulator, CollectiveWaitsForAllMembers) {
  PlanMaker pm(2);
  const int g = pm.group({0, 1});
  const auto c0 = pm.compute(0, 1.0);
  const auto c1 = pm.compute(1, 3.0);
  const double S = 4 * kGB, B = 2 * kGB, alpha = 0.125;
  const auto ar = pm.collective(g, CollectiveKind::all_reduce, S, {0, 1}, {{c0}, {c1}});
  const auto r = sim::Simulator().run(pm.finish(), exact_models(B, alpha, B, alpha));
  const double expected = 2.0 * (2 - 1) / 2 * S / B + 2 * (2 - 1) * alpha;
  for (auto op : ar) {
    EXPECT_EQ(span_of(r, op).start_s, 3.0);
    EXPECT_DOUBLE_EQ(span_of(r, op).end_s, 3.0 + expected);
  }
}

TEST(Simulator, RingAllReduceOverEightRanksMatchesTheFormula) {
  PlanMaker pm(8);
  std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const int g = pm.group(all);
  const double S = 3 * kGB, B = 150 * kGB, alpha = 3e-6;
  const auto ar = pm.collective(g, CollectiveKind::all_reduce, S, all);
  const auto rs = pm.collective(g, CollectiveKind::reduce_scatter, S, all);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(B, alpha, B, alpha));
  const double t_ar = 2.0 * 7 / 8 * S / B + 14 * alpha;
  const double t_rs = 7.0 / 8 * S / B + 7 * alpha;
  EXPECT_DOUBLE_EQ(span_of(r, ar[3]).end_s, t_ar);
  EXPECT_DOUBLE_EQ(span_of(r, rs[5]).start_s, span_of(r, ar[5]).end_s);
  EXPECT_DOUBLE_EQ(span_of(r, rs[5]).end_s - span_of(r, rs[5]).start_s, t_rs);
}

TEST(Simulator, CollectiveSharesLinksWithP2P) {
  PlanMaker pm(3);
  const int g = pm.group({0, 1});
  // Ring all-reduce over 2 ranks moves S per rank: 2 GB at 2 GB/s = 1 s alone.
  const auto ar = pm.collective(g, CollectiveKind::all_reduce, 2 * kGB, {0, 1});
  const auto [snd, rcv] = pm.p2p(0, 2, 2 * kGB);
  const auto r = sim::Simulator().run(pm.finish(), exact_models(2 * kGB, 0, 2 * kGB, 0));
  EXPECT_EQ(span_of(r, ar[0]).end_s, 2.0);
  EXPECT_EQ(span_of(r, snd).end_s, 2.0);
}

TEST(Simulator, P2PRunsWhenBothEndsArePosted) {
  PlanMaker pm(2);
  const auto work = pm.compute(0, 2.0);
  const auto [snd, rcv] = pm.p2p(0, 1, kGB, {work}, {});
  const auto r = sim::Simulator().run(pm.finish(), exact_models(4 * kGB, 0.5, kGB, 0));
  EXPECT_EQ(span_of(r, rcv).start_s, 2.0);  // posted at 0, waits for the send
  EXPECT_EQ(span_of(r, snd).start_s, 2.0);
  EXPECT_EQ(span_of(r, snd).end_s, 2.75);
  EXPECT_EQ(span_of(r, rcv).end_s, 2.75);
  EXPECT_EQ(span_of(r, rcv).peer, 0);
  EXPECT_EQ(span_of(r, snd).peer, 1);
}

TEST(Simulator, P2POpsAreNotSerialisedOnTheirStream) {
  PlanMaker pm(2);
  const auto late = pm.compute(0, 1.0);
  const auto [s1, r1] = pm.p2p(0, 1, kGB, {late}, {});  // first on both p2p streams
  const auto [s2, r2] = pm.p2p(1, 0, kGB);              // can run before it
  const auto r = sim::Simulator().run(pm.finish(), exact_models(kGB, 0, kGB, 0));
  EXPECT_EQ(span_of(r, s2).start_s, 0.0);
  EXPECT_EQ(span_of(r, s2).end_s, 1.0);
  EXPECT_EQ(span_of(r, s1).end_s, 2.0);
}

TEST(Simulator, MemoryPeakAndOom) {
  PlanMaker pm(2);
  const double GiB = units::kGiB;
  pm.plan().ranks[0].initial[static_cast<int>(TensorClass::params)] = 10 * GiB;
  pm.plan().ranks[1].initial[static_cast<int>(TensorClass::params)] = 10 * GiB;
  const auto fwd = pm.compute(0, 1.0);
  pm.mem(fwd, TensorClass::activations, 30 * GiB, true);
  const auto bwd = pm.compute(0, 1.0, plan::Phase::backward);
  pm.mem(bwd, TensorClass::gathered_params, 20 * GiB, false);
  pm.mem(bwd, TensorClass::activations, -30 * GiB, true);
  pm.mem(bwd, TensorClass::gathered_params, -20 * GiB, true);
  const auto big = pm.compute(1, 1.0);
  pm.mem(big, TensorClass::activations, 71 * GiB, false);
  pm.mem(big, TensorClass::activations, -71 * GiB, true);
  const auto r = sim::Simulator().run(pm.finish(), free_comm_models());
  const auto& r0 = r.ranks[0];
  EXPECT_EQ(r0.peak_memory_bytes, 60 * GiB);
  EXPECT_FALSE(r0.oom);
  EXPECT_EQ(r0.capacity_bytes, 80 * GiB);
  ASSERT_EQ(r0.memory.time_s, (std::vector<double>{0, 1, 1, 2}));
  EXPECT_EQ(r0.memory.total_at(0), 10 * GiB);
  EXPECT_EQ(r0.memory.total_at(1), 40 * GiB);
  EXPECT_EQ(r0.memory.total_at(2), 60 * GiB);
  EXPECT_EQ(r0.memory.total_at(3), 10 * GiB);
  EXPECT_EQ(r0.memory.bytes[2][static_cast<int>(TensorClass::gathered_params)], 20 * GiB);
  EXPECT_EQ(r.ranks[1].peak_memory_bytes, 81 * GiB);
  EXPECT_TRUE(r.ranks[1].oom);
}

TEST(Simulator, ComputeSlowsDownWhileCommunicating) {
  PlanMaker pm(2);
  const auto work = pm.compute(0, 2.0);
  const auto [snd, rcv] = pm.p2p(0, 1, kGB);
  auto models = exact_models(kGB, 0, kGB, 0);
  models.comm_compute_slowdown = 1.0;  // twice as slow during the 1 s transfer
  const auto r = sim::Simulator().run(pm.finish(), models);
  EXPECT_EQ(span_of(r, snd).end_s, 1.0);
  EXPECT_EQ(span_of(r, work).end_s, 2.5);  // 0.5 s of work done by t = 1, 1.5 s left
}

TEST(Simulator, DependencyCycleIsReported) {
  PlanMaker pm(1);
  const auto a = pm.compute(0, 1.0);
  const auto b = pm.compute(0, 1.0);
  pm.dep(a, b);
  try {
    sim::Simulator().run(pm.finish(), free_comm_models());
    FAIL() << "expected a stall";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("stalled"), std::string::npos) << e.what();
  }
}

TEST(Simulator, IsDeterministic) {
  auto make = [] {
    PlanMaker pm(8, 4, 2);
    PipelineSpec ps;
    ps.pp = 4;
    ps.dp = 2;
    ps.microbatches = 6;
    ps.p2p_bytes = 0.3 * kGB;
    ps.grad_bytes = 2 * kGB;
    ps.act_bytes = 1e8;
    add_pipeline(pm, ps);
    return pm.finish();
  };
  const auto plan_a = make();
  const auto plan_b = make();
  const auto models = exact_models(5 * kGB, 1e-5, kGB, 2e-5, sim::Algorithm::fastest);
  const std::string a = result::to_json(sim::Simulator().run(plan_a, models)).dump();
  const std::string b = result::to_json(sim::Simulator().run(plan_b, models)).dump();
  sim::Simulator reused;
  reused.run(plan_a, models);
  const std::string c = result::to_json(reused.run(plan_a, models)).dump();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

TEST(Simulator, FoldedHandBuiltPlanMatchesUnfolded) {
  auto make = [](bool fold) {
    PlanMaker pm(8, 2, 2);  // dp pairs share a node, stages are on different nodes
    PipelineSpec ps;
    ps.pp = 4;
    ps.dp = 2;
    ps.microbatches = 5;
    ps.p2p_bytes = 0.3 * kGB;
    ps.grad_bytes = 2 * kGB;
    ps.act_bytes = 1e8;
    if (fold) ps.built_dp = {0};
    add_pipeline(pm, ps);
    return pm.finish();
  };
  const auto folded = make(true), full = make(false);
  ASSERT_TRUE(folded.folded);
  ASSERT_LT(folded.ops.size(), full.ops.size());
  const auto models = exact_models(5 * kGB, 1e-5, kGB, 2e-5);
  const auto rf = sim::Simulator().run(folded, models);
  const auto ru = sim::Simulator().run(full, models);
  EXPECT_EQ(result::to_json(rf)["metrics"].dump(), result::to_json(ru)["metrics"].dump());
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(rf.ranks[r].peak_memory_bytes, ru.ranks[r].peak_memory_bytes) << r;
  }
  EXPECT_EQ(rf.ranks[1].same_as, 0);
  EXPECT_TRUE(rf.ranks[1].spans.empty());
  EXPECT_GT(rf.metrics.exposed_comm_s, 0.0);
}

}  // namespace
}  // namespace stratagem::test
