#include <gtest/gtest.h>

#include "engine/scenario/units.hpp"
#include "viz/model/memory_series.hpp"

namespace stratagem::viz {
namespace {

using plan::TensorClass;
constexpr double kGiB = units::kGiB;

// params 10 GiB resident; activations rise by 4 GiB at 1 s and 2 s, fall at 3 s.
result::MemoryTrack track() {
  result::MemoryTrack t;
  auto sample = [&](double time, double act) {
    ClassBytes b{};
    b[static_cast<int>(TensorClass::params)] = 10 * kGiB;
    b[static_cast<int>(TensorClass::activations)] = act * kGiB;
    t.time_s.push_back(time);
    t.bytes.push_back(b);
  };
  sample(0, 0);
  sample(1, 4);
  sample(2, 8);
  sample(3, 0);
  return t;
}

TEST(MemorySeries, BytesAtAnInstantAndThePeak) {
  const auto t = track();
  auto total = [](const ClassBytes& b) {
    double s = 0;
    for (double v : b) s += v;
    return s;
  };
  EXPECT_DOUBLE_EQ(total(bytes_at(t, -0.5)), 0);
  EXPECT_DOUBLE_EQ(total(bytes_at(t, 0)), 10 * kGiB);
  EXPECT_DOUBLE_EQ(total(bytes_at(t, 1.5)), 14 * kGiB);
  EXPECT_DOUBLE_EQ(total(bytes_at(t, 2)), 18 * kGiB);
  EXPECT_DOUBLE_EQ(total(bytes_at(t, 99)), 10 * kGiB);
  EXPECT_EQ(peak_sample(t), 2u);
}

TEST(MemorySeries, StackedBarMarksWhatDoesNotFit) {
  ClassBytes b{};
  b[static_cast<int>(TensorClass::params)] = 10 * kGiB;
  b[static_cast<int>(TensorClass::optimizer)] = 20 * kGiB;
  b[static_cast<int>(TensorClass::activations)] = 30 * kGiB;
  // Fits in 80 GiB: three pieces in class order, none red.
  auto bar = stacked_bar(b, 80 * kGiB);
  ASSERT_EQ(bar.size(), 3u);
  EXPECT_EQ(bar[0].cls, TensorClass::params);
  EXPECT_EQ(bar[1].cls, TensorClass::optimizer);
  EXPECT_DOUBLE_EQ(bar[1].from_bytes, 10 * kGiB);
  EXPECT_DOUBLE_EQ(bar[2].to_bytes, 60 * kGiB);
  for (const auto& p : bar) EXPECT_NE(p.color, palette::kOom);
  // 40 GiB: activations split at the capacity, the 20 GiB above it in the OOM colour.
  bar = stacked_bar(b, 40 * kGiB);
  ASSERT_EQ(bar.size(), 4u);
  EXPECT_EQ(bar[2].cls, TensorClass::activations);
  EXPECT_DOUBLE_EQ(bar[2].to_bytes, 40 * kGiB);
  EXPECT_FALSE(bar[2].over_capacity);
  EXPECT_TRUE(bar[3].over_capacity);
  EXPECT_EQ(bar[3].color, palette::kOom);
  EXPECT_DOUBLE_EQ(bar[3].from_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(bar[3].to_bytes, 60 * kGiB);
  // 5 GiB: everything from 5 GiB up is red, class by class.
  bar = stacked_bar(b, 5 * kGiB);
  ASSERT_EQ(bar.size(), 4u);
  EXPECT_FALSE(bar[0].over_capacity);
  EXPECT_TRUE(bar[1].over_capacity && bar[2].over_capacity && bar[3].over_capacity);
}

TEST(MemorySeries, CurveKeepsTheMaximumOfEachPixel) {
  const auto t = track();
  // 0.5 s per pixel from -1 s: columns [-1,-0.5) [-0.5,0) [0,0.5) [0.5,1) [1,1.5) ...
  const auto c = memory_curve(t, TimeView(-1, 0.5), 10);
  ASSERT_EQ(c.size(), 10u);
  EXPECT_LT(c[0], 0);
  EXPECT_LT(c[1], 0);
  EXPECT_FLOAT_EQ(c[2], 10 * kGiB);
  EXPECT_FLOAT_EQ(c[3], 10 * kGiB);
  EXPECT_FLOAT_EQ(c[4], 14 * kGiB);
  EXPECT_FLOAT_EQ(c[6], 18 * kGiB);
  EXPECT_FLOAT_EQ(c[7], 18 * kGiB);
  EXPECT_FLOAT_EQ(c[8], 18 * kGiB);  // [3, 3.5): the drop happens inside; the max stays
  EXPECT_FLOAT_EQ(c[9], 10 * kGiB);
  // One pixel covering the whole step still shows the peak.
  const auto wide = memory_curve(t, TimeView(0, 10), 1);
  EXPECT_FLOAT_EQ(wide[0], 18 * kGiB);
}

}  // namespace
}  // namespace stratagem::viz
