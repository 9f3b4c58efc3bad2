#include <gtest/gtest.h>

#include "tests/viz/viz_test_util.hpp"
#include "viz/ui/view_state.hpp"

namespace stratagem::viz {
namespace {

TEST(ViewState, WhatIfEditsResimulateAndInvalidOnesSayWhy) {
  ViewState st;
  const auto base = test::gpipe4_scenario();
  st.start_what_if(base, what_if_of(base), true);
  st.what_if->worker->wait_idle();
  ASSERT_TRUE(st.poll_what_if());
  ASSERT_EQ(st.what_if->doc, 0);
  EXPECT_EQ(st.docs[0]->result().scenario.strategy.schedule, scenario::Schedule::gpipe);

  // Invalid: the reason is kept, nothing is simulated, the last picture stays loaded.
  st.what_if->knobs.pp = 3;
  st.submit_what_if();
  EXPECT_NE(st.what_if->error.find("dp × pp"), std::string::npos) << st.what_if->error;
  EXPECT_FALSE(st.what_if->worker->busy());
  EXPECT_EQ(st.docs.size(), 1u);

  // Valid again: re-simulated off the calling thread, the document replaced in place.
  st.what_if->knobs.pp = 4;
  st.what_if->knobs.schedule = scenario::Schedule::one_f_one_b;
  st.submit_what_if();
  EXPECT_TRUE(st.what_if->error.empty());
  st.what_if->worker->wait_idle();
  ASSERT_TRUE(st.poll_what_if());
  EXPECT_EQ(st.docs.size(), 1u);
  EXPECT_EQ(st.docs[0]->result().scenario.strategy.schedule, scenario::Schedule::one_f_one_b);
  // Unchanged knobs submit nothing.
  st.submit_what_if();
  EXPECT_FALSE(st.what_if->worker->busy());
}

TEST(ViewState, WaitsForTheFirstChangeWhenOtherResultsAreLoaded) {
  ViewState st;
  const auto base = test::gpipe4_scenario();
  st.start_what_if(base, what_if_of(base), false);
  st.what_if->worker->wait_idle();
  EXPECT_FALSE(st.poll_what_if());
  EXPECT_EQ(st.what_if->doc, -1);
  st.what_if->knobs.micro_batches = 4;
  st.submit_what_if();
  st.what_if->worker->wait_idle();
  EXPECT_TRUE(st.poll_what_if());
  EXPECT_EQ(st.docs[st.what_if->doc]->result().scenario.strategy.grad_accum, 4);
}

TEST(ViewState, SelectingARecvMarksItsSendAndLocatesBoth) {
  ViewState st;
  st.add_doc(simulate(test::gpipe4_scenario(), "gpipe"));
  const auto& plan = *st.docs[0]->plan();
  const auto& t = plan.transfers.front();
  st.select(0, t.recv);
  ASSERT_TRUE(st.sel_note.empty()) << st.sel_note;
  EXPECT_EQ(st.marks[t.recv], Mark::selected);
  EXPECT_EQ(st.marks[t.send], Mark::upstream);
  bool send_located = false;
  for (const auto& m : st.marked) {
    if (m.op != t.send) continue;
    send_located = true;
    EXPECT_EQ(m.rank, t.src);
    EXPECT_EQ(st.docs[0]->spans(m.rank)[m.span].op, t.send);
  }
  EXPECT_TRUE(send_located);
  st.clear_selection();
  EXPECT_TRUE(st.marks.empty());
}

}  // namespace
}  // namespace stratagem::viz
