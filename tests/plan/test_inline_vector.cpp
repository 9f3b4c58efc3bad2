// InlineVector: a draft op's deps and effects, a collective instance's members. Its elements
// must read back in insertion order whether they sit inline or have moved to the heap.
#include <gtest/gtest.h>

#include <vector>

#include "engine/plan/inline_vector.hpp"

namespace stratagem::plan {
namespace {

std::vector<int> contents(const InlineVector<int, 2>& v) { return {v.begin(), v.end()}; }

TEST(InlineVector, KeepsOrderInlineAndAfterSpilling) {
  InlineVector<int, 2> v;
  EXPECT_TRUE(v.empty());
  v.push_back(7);
  v.push_back(8);
  EXPECT_EQ(contents(v), (std::vector<int>{7, 8}));
  v.push_back(9);  // the third moves all three to the heap
  v.push_back(10);
  EXPECT_EQ(contents(v), (std::vector<int>{7, 8, 9, 10}));
  EXPECT_EQ(v.size(), 4u);
  EXPECT_EQ(v[2], 9);
  v[0] = 1;
  EXPECT_EQ(contents(v), (std::vector<int>{1, 8, 9, 10}));
}

TEST(InlineVector, ClearAppendAndConstruction) {
  InlineVector<int, 2> v = {1, 2, 3};
  EXPECT_EQ(contents(v), (std::vector<int>{1, 2, 3}));
  v.clear();
  EXPECT_TRUE(v.empty());
  v.push_back(4);  // inline again after clearing a spilled vector
  const std::vector<int> more = {5, 6};
  v.append(more.begin(), more.end());
  EXPECT_EQ(contents(v), (std::vector<int>{4, 5, 6}));
  const InlineVector<int, 2> from_vector(std::vector<int>{3, 2, 1});
  EXPECT_EQ(contents(from_vector), (std::vector<int>{3, 2, 1}));
  InlineVector<int, 2> copy = v;  // copies are independent
  copy.push_back(7);
  EXPECT_EQ(contents(v), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(contents(copy), (std::vector<int>{4, 5, 6, 7}));
}

TEST(InlineVector, AMovedFromVectorIsEmpty) {
  InlineVector<int, 2> spilled = {1, 2, 3};
  InlineVector<int, 2> to(std::move(spilled));
  EXPECT_EQ(contents(to), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(spilled.empty());  // NOLINT(bugprone-use-after-move): the state is specified
  EXPECT_EQ(spilled.begin(), spilled.end());
  InlineVector<int, 2> small = {4};
  to = std::move(small);
  EXPECT_EQ(contents(to), (std::vector<int>{4}));
  EXPECT_TRUE(small.empty());  // NOLINT(bugprone-use-after-move)
  spilled.push_back(5);  // usable again
  EXPECT_EQ(contents(spilled), (std::vector<int>{5}));
}

}  // namespace
}  // namespace stratagem::plan
