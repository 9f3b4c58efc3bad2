// Pipeline bubbles with fixed compute times and free communication: the schedules' closed
// forms, (p−1)/(m+p−1) for GPipe and 1F1B, (p−1)/(v·m+p−1) interleaved, and for the zero-bubble
// schedules with equal F, B and W times (Qi et al. 2024, §2.1 and §6) a third of 1F1B's bubble
// time for ZB-H1, (p−1)/(3m+p−1) of the step.
#include <gtest/gtest.h>

#include "sim/simulator.hpp"
#include "tests/sim/plan_maker.hpp"

namespace stratagem::test {
namespace {

double bubble(scenario::Schedule schedule, int p, int m, int v, double f, double b, double w = 0) {
  PlanMaker pm(p);
  PipelineSpec ps;
  ps.schedule = schedule;
  ps.pp = p;
  ps.chunks = v;
  ps.microbatches = m;
  ps.forward_s = f;
  ps.backward_s = b;
  ps.weight_s = w;
  add_pipeline(pm, ps);
  const auto r = sim::Simulator().run(pm.finish(), free_comm_models());
  return r.metrics.bubble_fraction;
}

struct Case {
  int p, m;
  double f, b;
};

TEST(Bubble, GPipe) {
  for (const Case c : {Case{4, 8, 1, 2}, Case{2, 3, 1, 1}, Case{8, 16, 0.5, 1}, Case{4, 1, 1, 2}}) {
    EXPECT_NEAR(bubble(scenario::Schedule::gpipe, c.p, c.m, 1, c.f, c.b),
                (c.p - 1.0) / (c.m + c.p - 1.0), 1e-12)
        << "p " << c.p << " m " << c.m;
  }
}

TEST(Bubble, OneFOneB) {
  for (const Case c : {Case{4, 8, 1, 2}, Case{2, 3, 1, 1}, Case{8, 16, 0.5, 1}, Case{4, 4, 1, 2},
                       Case{16, 128, 1, 2}}) {
    EXPECT_NEAR(bubble(scenario::Schedule::one_f_one_b, c.p, c.m, 1, c.f, c.b),
                (c.p - 1.0) / (c.m + c.p - 1.0), 1e-12)
        << "p " << c.p << " m " << c.m;
  }
}

TEST(Bubble, Interleaved) {
  for (const int v : {2, 3}) {
    for (const Case c : {Case{4, 8, 1, 2}, Case{2, 4, 1, 1}, Case{4, 4, 1, 2}, Case{4, 12, 1, 2}}) {
      EXPECT_NEAR(bubble(scenario::Schedule::interleaved, c.p, c.m, v, c.f, c.b),
                  (c.p - 1.0) / (v * c.m + c.p - 1.0), 1e-12)
          << "p " << c.p << " m " << c.m << " v " << v;
    }
  }
}

// ZB-H1 (PyTorch's ScheduleInterleavedZeroBubble on one stage per rank) with F = B = W = T:
// the step is 3mT of compute plus (p−1)T of bubble, against 1F1B's (p−1)·3T.
TEST(Bubble, ZeroBubbleH1IsAThirdOfOneFOneB) {
  for (const Case c : {Case{4, 8, 1, 1}, Case{2, 3, 1, 1}, Case{8, 16, 1, 1}, Case{4, 4, 1, 1},
                       Case{8, 32, 1, 1}}) {
    EXPECT_NEAR(bubble(scenario::Schedule::zb_h1, c.p, c.m, 1, 1, 1, 1),
                (c.p - 1.0) / (3.0 * c.m + c.p - 1.0), 1e-12)
        << "p " << c.p << " m " << c.m;
    EXPECT_NEAR(bubble(scenario::Schedule::one_f_one_b, c.p, c.m, 1, 1, 2),
                3.0 * (c.p - 1.0) / (3.0 * c.m + 3.0 * (c.p - 1.0)), 1e-12);
  }
}

// ZB-V (PyTorch's ScheduleZBVZeroBubble) with F = B = W = T per stage (T/2 per chunk): the
// steady state has no bubble; what is left is the fill, one chunk forward per hop, (p−1)·T/2
// against ZB-H1's (p−1)·T: (p−1)/(6m+p−1) of the step.
TEST(Bubble, ZeroBubbleVLeavesHalfAChunkPerHop) {
  for (const Case c : {Case{4, 8, 1, 1}, Case{2, 3, 1, 1}, Case{8, 16, 1, 1}, Case{4, 16, 1, 1},
                       Case{8, 32, 1, 1}}) {
    EXPECT_NEAR(bubble(scenario::Schedule::zbv, c.p, c.m, 2, 1, 1, 1),
                (c.p - 1.0) / (6.0 * c.m + c.p - 1.0), 1e-12)
        << "p " << c.p << " m " << c.m;
  }
}

// DualPipeV (PyTorch's ScheduleDualPipeV, its F+B pairs run back to back as PyTorch's runtime
// does by default), m ≥ 2p, F = B = W: below ZB-V's bubble by a third or more (p 4, m 8: 1/26
// of the step against ZB-V's 1/17), as its warm-up runs both chunks' forwards before the first
// backward arrives.
TEST(Bubble, DualPipeV) {
  for (const Case c : {Case{4, 8, 1, 1}, Case{2, 4, 1, 1}, Case{8, 16, 1, 1}, Case{4, 16, 1, 1},
                       Case{8, 32, 1, 1}}) {
    const double v = bubble(scenario::Schedule::dualpipev, c.p, c.m, 2, 1, 1, 1);
    EXPECT_GT(v, 0.0) << "p " << c.p << " m " << c.m;
    EXPECT_LT(v, 0.7 * bubble(scenario::Schedule::zbv, c.p, c.m, 2, 1, 1, 1))
        << "p " << c.p << " m " << c.m;
  }
}

TEST(Bubble, NoPipelineNoBubble) {
  EXPECT_EQ(bubble(scenario::Schedule::one_f_one_b, 1, 4, 1, 1, 2), 0.0);
}

}  // namespace
}  // namespace stratagem::test
