// Pipeline bubbles with fixed compute times and free communication: the schedules' closed
// forms, (p−1)/(m+p−1) for GPipe and 1F1B and (p−1)/(v·m+p−1) interleaved.
#include <gtest/gtest.h>

#include "sim/simulator.hpp"
#include "tests/sim/plan_maker.hpp"

namespace stratagem::test {
namespace {

double bubble(scenario::Schedule schedule, int p, int m, int v, double f, double b) {
  PlanMaker pm(p);
  PipelineSpec ps;
  ps.schedule = schedule;
  ps.pp = p;
  ps.chunks = v;
  ps.microbatches = m;
  ps.forward_s = f;
  ps.backward_s = b;
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

TEST(Bubble, NoPipelineNoBubble) {
  EXPECT_EQ(bubble(scenario::Schedule::one_f_one_b, 1, 4, 1, 1, 2), 0.0);
}

}  // namespace
}  // namespace stratagem::test
