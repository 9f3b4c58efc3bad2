// The plan index the simulator's event loop reads (sim/plan_index.hpp): what it gathers from a
// plan, and the plan inconsistencies it refuses with one clear error.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/scenario/error.hpp"
#include "sim/plan_index.hpp"
#include "sim/simulator.hpp"
#include "tests/sim/plan_maker.hpp"

namespace stratagem::test {
namespace {

bool has(std::span<const plan::OpId> list, plan::OpId id) {
  return std::find(list.begin(), list.end(), id) != list.end();
}

TEST(PlanIndex, GathersDurationsSuccessorsAndMembers) {
  PlanMaker pm(2);
  const auto a = pm.compute(0, 1.5);
  const auto b = pm.compute(0, 0.25);
  const auto c = pm.compute(1, 0.5);
  const int g = pm.group({0, 1});
  const auto ar = pm.collective(g, plan::CollectiveKind::all_reduce, 1e6, {0, 1}, {{b}, {c}});
  const auto [send, recv] = pm.p2p(0, 1, 1e3, {ar[0]}, {ar[1]});
  const plan::StepPlan& p = pm.finish();
  const sim::CostModels models = free_comm_models();
  const sim::PlanIndex index(p, models);

  EXPECT_DOUBLE_EQ(index.ops[a].duration_s, models.compute->duration(
                                                 std::get<plan::Compute>(p.ops[a].payload)));
  EXPECT_GT(index.ops[a].duration_s, 0);
  EXPECT_EQ(index.ops[ar[0]].duration_s, 0);  // only compute has a duration of its own
  EXPECT_EQ(index.ops[c].rank, 1);
  EXPECT_EQ(index.ops[a].category, sim::Category::compute);
  EXPECT_EQ(index.ops[ar[1]].category, sim::Category::collective);
  EXPECT_EQ(index.ops[send].category, sim::Category::p2p);

  // b follows a on the compute stream; the all-reduce depends on b.
  EXPECT_TRUE(has(index.successors(a), b));
  EXPECT_TRUE(has(index.successors(b), ar[0]));
  EXPECT_EQ(index.pending[a], 0);
  EXPECT_EQ(index.pending[b], 1);
  EXPECT_EQ(index.pending[ar[0]], 1);

  // Activities: the instance first (its members in group order), then the transfer.
  ASSERT_EQ(index.activities(), 2);
  EXPECT_EQ(index.ops[ar[0]].activity, 0);
  EXPECT_EQ(index.ops[send].activity, index.instances);
  const auto members = index.members(0);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0], ar[0]);
  EXPECT_EQ(members[1], ar[1]);
  const auto ends = index.members(index.instances);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0], send);
  EXPECT_EQ(ends[1], recv);
  EXPECT_EQ(index.activity[0].group, g);
  EXPECT_EQ(index.activity[0].bytes, 1e6);
  EXPECT_EQ(index.activity[1].group, -1);
  EXPECT_TRUE(index.activity[1].same_domain);  // both ranks on node 0
  EXPECT_EQ(index.group_shape[g].size, 2);
  EXPECT_EQ(index.group_shape[g].nodes, 1);
}

std::string error_of(const plan::StepPlan& p) {
  try {
    sim::Simulator().run(p, free_comm_models());
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanIndex, AnInstanceListingAnOpThatIsNotItsCollectiveIsRefused) {
  PlanMaker pm(2);
  const auto a = pm.compute(0, 1.0);
  const int g = pm.group({0, 1});
  pm.collective(g, plan::CollectiveKind::all_reduce, 1e6, {0, 1});
  plan::StepPlan& p = pm.finish();
  p.collectives[0].ops[0] = a;  // a compute op
  EXPECT_NE(error_of(p).find("collective instance 0 lists op"), std::string::npos) << error_of(p);
  p.collectives[0].ops[0] = 1000;  // no such op
  EXPECT_NE(error_of(p).find("which is not one of its collectives"), std::string::npos);
}

TEST(PlanIndex, ATransferWithoutItsReceiveIsRefused) {
  PlanMaker pm(2);
  pm.p2p(0, 1, 1e3);
  plan::StepPlan& p = pm.finish();
  p.transfers[0].recv = plan::kNoOp;
  EXPECT_NE(error_of(p).find("lacks its recv"), std::string::npos) << error_of(p);
}

TEST(PlanIndex, ACollectiveNamingNoInstanceAndATransferWithoutOpsAreRefused) {
  PlanMaker pm(2);
  const int g = pm.group({0, 1});
  const auto ar = pm.collective(g, plan::CollectiveKind::all_reduce, 1e6, {0, 1});
  plan::StepPlan& p = pm.finish();
  std::get<plan::Collective>(p.ops[ar[1]].payload).instance = 5;
  EXPECT_NE(error_of(p).find("names instance 5 of 1"), std::string::npos) << error_of(p);
  std::get<plan::Collective>(p.ops[ar[1]].payload).instance = 0;
  p.transfers.push_back({plan::kNoOp, plan::kNoOp, 0, 1, 1e3});  // no op refers to it
  EXPECT_NE(error_of(p).find("transfer 0 lacks its send"), std::string::npos) << error_of(p);
}

TEST(PlanIndex, OpIdsMustEqualTheirIndex) {
  PlanMaker pm(1);
  pm.compute(0, 1.0);
  pm.compute(0, 1.0);
  plan::StepPlan& p = pm.finish();
  p.ops[1].id = 0;
  EXPECT_NE(error_of(p).find("ids must equal their index"), std::string::npos) << error_of(p);
}

}  // namespace
}  // namespace stratagem::test
