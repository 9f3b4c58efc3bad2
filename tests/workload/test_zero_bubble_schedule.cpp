// The zero-bubble schedules' per-rank orders against PyTorch's generators
// (tests/workload/data/pytorch_zero_bubble_orders.txt, printed from torch.distributed.pipelining
// schedules.py), and the invariants every order keeps.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "engine/workload/schedule.hpp"

namespace stratagem::workload {
namespace {

using scenario::Schedule;

// An order in PyTorch's notation: <stage index><F|I|W><micro-batch>, the stage index being
// the virtual stage the chunk runs.
std::string pytorch_notation(Schedule schedule, int pp, int rank, int chunks, int microbatches) {
  std::string out;
  for (const ScheduleItem& it : schedule_order(schedule, pp, rank, chunks, microbatches)) {
    const char kind = it.forward                        ? 'F'
                      : it.pass == BackwardPass::weight ? 'W'
                      : it.pass == BackwardPass::input  ? 'I'
                                                        : 'B';
    if (!out.empty()) out += ' ';
    out += std::to_string(virtual_stage(schedule, pp, rank, it.chunk)) + kind +
           std::to_string(it.microbatch);
  }
  return out;
}

TEST(ZeroBubbleSchedule, OrdersEqualPyTorchsGenerators) {
  std::ifstream in(std::string(STRATAGEM_SOURCE_DIR) +
                   "/tests/workload/data/pytorch_zero_bubble_orders.txt");
  ASSERT_TRUE(in) << "missing data file";
  const std::map<std::string, std::pair<Schedule, int>> names = {
      {"zb-h1", {Schedule::zb_h1, 1}},
      {"interleaved-zb", {Schedule::interleaved_zb, 2}},
      {"zbv", {Schedule::zbv, 2}},
      {"dualpipev", {Schedule::dualpipev, 2}}};
  std::string line;
  int compared = 0;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // "<name> pp=<p> m=<m> rank=<r>: <actions>"
    const auto colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    std::istringstream head(line.substr(0, colon));
    std::string name, pp_s, m_s, r_s;
    head >> name >> pp_s >> m_s >> r_s;
    const int pp = std::stoi(pp_s.substr(3)), m = std::stoi(m_s.substr(2)),
              rank = std::stoi(r_s.substr(5));
    const auto [schedule, chunks] = names.at(name);
    const std::string expected = line.substr(colon + 2);
    EXPECT_EQ(pytorch_notation(schedule, pp, rank, chunks, m), expected)
        << name << " pp " << pp << " m " << m << " rank " << rank;
    seen.insert(name);
    ++compared;
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_GE(compared, 200);
}

// Every (chunk, micro-batch) runs F, then B, then W, once each (DualPipeV: or F then a whole
// backward); the other schedules run no whole backward.
TEST(ZeroBubbleSchedule, EachMicroBatchRunsForwardThenInputThenWeightOnce) {
  for (const Schedule schedule :
       {Schedule::zb_h1, Schedule::interleaved_zb, Schedule::zbv, Schedule::dualpipev}) {
    for (int pp = 2; pp <= 8; ++pp) {
      for (int m = 1; m <= 32; ++m) {
        const int chunks = schedule == Schedule::zb_h1 ? 1 : 2;
        if (schedule == Schedule::interleaved_zb && m % std::max(1, m / pp) != 0) continue;
        if (schedule == Schedule::dualpipev && m < 2 * pp) continue;
        for (int rank = 0; rank < pp; ++rank) {
          std::map<std::pair<int, int>, int> state;  // 0 none, 1 F, 2 B, 3 W
          for (const ScheduleItem& it : schedule_order(schedule, pp, rank, chunks, m)) {
            int& st = state[{it.chunk, it.microbatch}];
            const bool whole = !it.forward && it.pass == BackwardPass::full;
            ASSERT_TRUE(!whole || schedule == Schedule::dualpipev);
            const int next = it.forward ? 1 : it.pass == BackwardPass::input ? 2 : 3;
            if (whole) {
              ASSERT_EQ(st, 1) << "pp " << pp << " m " << m << " rank " << rank;
              st = 3;
              continue;
            }
            ASSERT_EQ(st + 1, next) << to_string(schedule) << " pp " << pp << " m " << m << " rank "
                                    << rank << " chunk " << it.chunk << " mb " << it.microbatch;
            st = next;
          }
          ASSERT_EQ(state.size(), static_cast<std::size_t>(chunks * m));
          for (const auto& [key, st] : state) ASSERT_EQ(st, 3);
        }
      }
    }
  }
}

TEST(ZeroBubbleSchedule, VirtualStagesOfTheVAndTheLoop) {
  // zbv on 4 ranks: rank 0 runs stages 0 and 7, rank 3 stages 3 and 4.
  EXPECT_EQ(virtual_stage(Schedule::zbv, 4, 0, 1), 7);
  EXPECT_EQ(virtual_stage(Schedule::zbv, 4, 3, 0), 3);
  EXPECT_EQ(virtual_stage(Schedule::zbv, 4, 3, 1), 4);
  EXPECT_EQ(virtual_stage(Schedule::interleaved_zb, 4, 3, 1), 7);
  EXPECT_EQ(virtual_stage(Schedule::dualpipev, 4, 1, 1), 6);
  for (const Schedule s :
       {Schedule::zbv, Schedule::dualpipev, Schedule::interleaved, Schedule::zb_h1}) {
    const int chunks = s == Schedule::zb_h1 ? 1 : 2;
    for (int vs = 0; vs < 4 * chunks; ++vs) {
      const auto [stage, chunk] = stage_chunk(s, 4, vs);
      EXPECT_EQ(virtual_stage(s, 4, stage, chunk), vs);
    }
  }
}

}  // namespace
}  // namespace stratagem::workload
