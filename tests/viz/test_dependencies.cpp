#include <gtest/gtest.h>

#include "engine/plan/plan.hpp"
#include "tests/viz/viz_test_util.hpp"
#include "viz/model/dependencies.hpp"
#include "viz/model/sim_worker.hpp"

namespace stratagem::viz {
namespace {

TEST(Dependencies, RecvWaitsForItsSendAndFeedsItsCompute) {
  const auto doc = simulate(test::gpipe4_scenario(), "gpipe");
  ASSERT_TRUE(doc->plan());
  const Dependencies deps(plan_for(*doc), *doc);
  ASSERT_TRUE(deps.ok()) << deps.error();
  const auto& plan = *doc->plan();
  int checked = 0;
  for (const auto& t : plan.transfers) {
    const auto up = deps.upstream(t.recv);
    EXPECT_NE(std::find(up.begin(), up.end(), t.send), up.end());
    const auto down = deps.downstream(t.send);
    EXPECT_NE(std::find(down.begin(), down.end(), t.recv), down.end());
    // Whatever lists the recv as a dep is downstream of it.
    for (const auto& op : plan.ops) {
      const auto d = plan.deps_of(op);
      if (std::find(d.begin(), d.end(), t.recv) != d.end()) {
        const auto recv_down = deps.downstream(t.recv);
        EXPECT_NE(std::find(recv_down.begin(), recv_down.end(), op.id), recv_down.end());
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  const auto marks = mark_dependencies(deps, plan.ops.size(), plan.transfers[0].recv);
  EXPECT_EQ(marks[plan.transfers[0].recv], Mark::selected);
  EXPECT_EQ(marks[plan.transfers[0].send], Mark::upstream);
}

TEST(Dependencies, ARebuiltPlanMatchesASavedResult) {
  const auto sim = simulate(test::gpipe4_scenario(), "gpipe");
  // As loaded from a file: no plan attached, so it is rebuilt from the scenario.
  const Document loaded(sim->result(), "loaded");
  ASSERT_FALSE(loaded.plan());
  const Dependencies deps(plan_for(loaded), loaded);
  EXPECT_TRUE(deps.ok()) << deps.error();
}

TEST(Dependencies, APlanThatDoesNotMatchIsRefused) {
  const auto sim = simulate(test::gpipe4_scenario(), "gpipe");
  result::RunResult r = sim->result();
  r.ranks[0].spans[0].kind = r.ranks[0].spans[0].kind == result::SpanKind::forward
                                 ? result::SpanKind::optimizer
                                 : result::SpanKind::forward;
  const Document doc(r, "edited");
  const Dependencies deps(plan_for(doc), doc);
  EXPECT_FALSE(deps.ok());
  EXPECT_NE(deps.error().find("rank 0"), std::string::npos);
  EXPECT_TRUE(deps.upstream(0).empty());
}

}  // namespace
}  // namespace stratagem::viz
