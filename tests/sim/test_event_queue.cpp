#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>

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

// Pushes and pops interleaved at random (few distinct times, so many ties): every pop is the
// earliest (time, push order) still queued, as a sorted reference says.
TEST(EventQueue, InterleavedPushAndPopMatchASortedReference) {
  std::mt19937 rng(7);
  EventQueue q;
  std::vector<std::pair<double, int>> ref;  // (time, push number) still queued
  int pushed = 0;
  for (int step = 0; step < 20000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      const double t = static_cast<double>(rng() % 50);
      q.push(t, 0, pushed);
      ref.emplace_back(t, pushed++);
    } else {
      const auto it = std::min_element(ref.begin(), ref.end());
      const Event e = q.pop();
      ASSERT_EQ(e.index, it->second) << "step " << step;
      ASSERT_EQ(e.time_s, it->first);
      ref.erase(it);
    }
    ASSERT_EQ(q.size(), ref.size());
  }
  while (!q.empty()) {
    const auto it = std::min_element(ref.begin(), ref.end());
    ASSERT_EQ(q.pop().index, it->second);
    ref.erase(it);
  }
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
