#include <gtest/gtest.h>

#include "engine/scenario/error.hpp"
#include "viz/model/time_axis.hpp"

namespace stratagem::viz {
namespace {

TEST(TimeView, MapsTimeToPixelsAndBack) {
  const TimeView v(0.010, 1e-5);  // left edge at 10 ms, 10 µs per pixel
  EXPECT_DOUBLE_EQ(v.to_px(0.010), 0);
  EXPECT_NEAR(v.to_px(0.011), 100, 1e-9);
  EXPECT_NEAR(v.to_time(250), 0.0125, 1e-15);
  EXPECT_NEAR(v.right_s(1000), 0.020, 1e-15);
}

TEST(TimeView, FitShowsTheRangeAcrossTheWidth) {
  TimeView v;
  v.fit(0, 0.3, 1200);
  EXPECT_DOUBLE_EQ(v.left_s(), 0);
  EXPECT_DOUBLE_EQ(v.seconds_per_px(), 0.3 / 1200);
  EXPECT_DOUBLE_EQ(v.to_px(0.3), 1200);
}

TEST(TimeView, ZoomKeepsTheInstantUnderTheMouse) {
  TimeView v(0, 1e-4);
  const double t = v.to_time(300);
  v.zoom_at(300, 4);
  EXPECT_DOUBLE_EQ(v.seconds_per_px(), 2.5e-5);
  EXPECT_NEAR(v.to_time(300), t, 1e-15);
  v.zoom_at(300, 0.25);
  EXPECT_DOUBLE_EQ(v.seconds_per_px(), 1e-4);
  EXPECT_NEAR(v.left_s(), 0, 1e-15);
}

TEST(TimeView, DraggingRightShowsEarlierTime) {
  TimeView v(1.0, 1e-3);
  v.pan_px(200);
  EXPECT_DOUBLE_EQ(v.left_s(), 0.8);
  v.pan_px(-100);
  EXPECT_DOUBLE_EQ(v.left_s(), 0.9);
}

TEST(TimeView, ClampKeepsTheStepInView) {
  TimeView v(-5, 1.0);  // far left and far zoomed out
  v.clamp(0, 1, 1000);
  // At most the step plus 5 % on each side across the width.
  EXPECT_DOUBLE_EQ(v.seconds_per_px(), 1.1 / 1000);
  EXPECT_DOUBLE_EQ(v.left_s(), -0.05);
  TimeView w(10, 1e-6);  // past the end
  w.clamp(0, 1, 1000);
  EXPECT_NEAR(w.left_s(), 1.049, 1e-12);
}

TEST(Ruler, LabelsRoundTimesFarEnoughApart) {
  // 1 ms per 100 px; labels need 80 px: a labelled tick every 1 ms, minor every 0.2 ms.
  const TimeView v(0, 1e-5);
  const auto ticks = ruler_ticks(v, 1000, 80);
  ASSERT_EQ(ticks.size(), 51u);
  EXPECT_DOUBLE_EQ(ticks[0].t_s, 0);
  EXPECT_TRUE(ticks[0].major);
  EXPECT_EQ(ticks[0].label, "0");
  EXPECT_NEAR(ticks[1].t_s, 2e-4, 1e-15);
  EXPECT_FALSE(ticks[1].major);
  EXPECT_TRUE(ticks[5].major);
  EXPECT_EQ(ticks[5].label, "1.00 ms");
  EXPECT_EQ(ticks[50].label, "10.0 ms");
  // 2 × 10^k steps split in four.
  const auto t2 = ruler_ticks(TimeView(0, 1.5e-5), 1000, 80);  // 80 px = 1.2 ms -> 2 ms
  EXPECT_NEAR(t2[1].t_s, 5e-4, 1e-15);
  EXPECT_TRUE(t2[4].major);
  EXPECT_EQ(t2[4].label, "2.00 ms");
}

TEST(Format, DurationsBytesAndFlops) {
  EXPECT_EQ(format_duration(0), "0");
  EXPECT_EQ(format_duration(850e-9), "850 ns");
  EXPECT_EQ(format_duration(12.5e-6), "12.5 µs");
  EXPECT_EQ(format_duration(0.0032), "3.20 ms");
  EXPECT_EQ(format_duration(1.25), "1.25 s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(24.0 * 1024 * 1024 * 1024), "24.0 GiB");
  EXPECT_EQ(format_flops(3.5e11), "350 GFLOP");
}

TEST(Format, ParsesDurationsAndRanges) {
  EXPECT_DOUBLE_EQ(parse_duration("12ms", "x"), 0.012);
  EXPECT_DOUBLE_EQ(parse_duration("0.5 s", "x"), 0.5);
  EXPECT_DOUBLE_EQ(parse_duration("300us", "x"), 3e-4);
  EXPECT_DOUBLE_EQ(parse_duration("2", "x"), 2);
  EXPECT_THROW(parse_duration("3 parsecs", "x"), SpecError);
  EXPECT_THROW(parse_duration("fast", "x"), SpecError);
  const auto r = parse_time_range("10ms:25ms", "--zoom");
  EXPECT_DOUBLE_EQ(r.first, 0.010);
  EXPECT_DOUBLE_EQ(r.second, 0.025);
  EXPECT_THROW(parse_time_range("25ms:10ms", "--zoom"), SpecError);
  EXPECT_THROW(parse_time_range("25ms", "--zoom"), SpecError);
}

}  // namespace
}  // namespace stratagem::viz
