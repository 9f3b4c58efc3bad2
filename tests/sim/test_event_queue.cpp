#include <gtest/gtest.h>

#include "sim/event_queue.hpp"

namespace stratagem::sim {
namespace {

TEST(EventQueue, PopsByTimeThenPushOrder) {
  EventQueue q;
  q.push(2.0, 0, 10);
  q.push(1.0, 0, 20);
  q.push(2.0, 0, 11);
  q.push(1.0, 0, 21);
  q.push(0.5, 0, 30);
  q.push(2.0, 0, 12);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.pop().index);
  EXPECT_EQ(order, (std::vector<int>{30, 20, 21, 10, 11, 12}));
}

TEST(EventQueue, ManyTiesKeepInsertionOrder) {
  EventQueue q;
  for (int i = 0; i < 1000; ++i) q.push(3.0, 0, i);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(q.pop().index, i);
}

TEST(EventQueue, ClearRestartsSequence) {
  EventQueue q;
  q.push(1.0, 7, 1, 3);
  EXPECT_EQ(q.pushed(), 1u);
  const Event e = q.pop();
  EXPECT_EQ(e.kind, 7u);
  EXPECT_EQ(e.version, 3u);
  q.push(1.0, 0, 2);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pushed(), 0u);
  q.push(5.0, 0, 9);
  EXPECT_EQ(q.top().seq, 0u);
}

}  // namespace
}  // namespace stratagem::sim
