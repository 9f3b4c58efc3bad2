#include <gtest/gtest.h>

#include <numeric>

#include "tests/viz/viz_test_util.hpp"
#include "viz/model/aggregate.hpp"

namespace stratagem::viz {
namespace {

using plan::Stream;
using result::SpanKind;
using test::make_span;

std::vector<int> all_of(const std::vector<result::Span>& spans) {
  std::vector<int> idx(spans.size());
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

TEST(VisibleBlocks, OnlySpansInTheVisibleRange) {
  std::vector<result::Span> spans;
  for (int i = 0; i < 10; ++i) {
    spans.push_back(make_span(SpanKind::forward, Stream::compute, i * 1.0, i * 1.0 + 0.5, i, i));
  }
  const auto lane = all_of(spans);
  std::vector<Block> out;
  // Seconds 2.6 .. 6.6 over 400 px: spans 3, 4, 5, 6 (6 starts at 6.0 < 6.6).
  visible_blocks(spans, lane, TimeView(2.6, 0.01), 400, 1, out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].first, 3);
  EXPECT_NEAR(out[0].x0, 40, 1e-9);
  EXPECT_NEAR(out[0].x1, 90, 1e-9);
  EXPECT_EQ(out[3].first, 6);
  for (const auto& b : out) EXPECT_EQ(b.count, 1);
  // A span cut by the left edge is kept.
  visible_blocks(spans, lane, TimeView(2.2, 0.01), 100, 1, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].first, 2);
  EXPECT_NEAR(out[0].x0, -20, 1e-9);
}

TEST(VisibleBlocks, SpansNarrowerThanAPixelMerge) {
  // 1,000 back-to-back 1 µs ops, then one 1 ms op, then 10 more 1 µs ops 0.5 ms later.
  std::vector<result::Span> spans;
  for (int i = 0; i < 1000; ++i) {
    spans.push_back(
        make_span(SpanKind::all_reduce, Stream::collective, i * 1e-6, (i + 1) * 1e-6, i));
  }
  spans.push_back(make_span(SpanKind::all_gather, Stream::collective, 1e-3, 2e-3, 1000));
  for (int i = 0; i < 10; ++i) {
    spans.push_back(make_span(SpanKind::all_reduce, Stream::collective, 2.5e-3 + i * 1e-6,
                              2.5e-3 + (i + 1) * 1e-6, 1001 + i));
  }
  const auto lane = all_of(spans);
  std::vector<Block> out;
  // 10 µs per pixel: each small op is a tenth of a pixel.
  visible_blocks(spans, lane, TimeView(0, 1e-5), 1000, 1, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first, 0);
  EXPECT_EQ(out[0].count, 1000);  // the whole run: gaps never reach a pixel
  EXPECT_NEAR(out[0].x1, 100, 1e-9);
  EXPECT_EQ(out[1].first, 1000);  // the wide op stands alone
  EXPECT_EQ(out[1].count, 1);
  EXPECT_EQ(out[1].kind, SpanKind::all_gather);
  EXPECT_EQ(out[2].first, 1001);
  EXPECT_EQ(out[2].count, 10);
  EXPECT_NEAR(out[2].x1 - out[2].x0, 1, 1e-9);  // widened to one pixel
  // Zoomed in to 0.1 µs per pixel every op is its own 10 px block again.
  visible_blocks(spans, lane, TimeView(0, 1e-7), 1000, 1, out);
  ASSERT_EQ(out.size(), 100u);
  for (const auto& b : out) EXPECT_EQ(b.count, 1);
}

TEST(VisibleBlocks, SmallOpsSeparatedByMoreThanAPixelStayApart) {
  std::vector<result::Span> spans;
  for (int i = 0; i < 5; ++i) {
    spans.push_back(make_span(SpanKind::send, Stream::p2p, i * 1e-3, i * 1e-3 + 1e-6, i));
  }
  std::vector<Block> out;
  visible_blocks(spans, all_of(spans), TimeView(0, 1e-5), 1000, 1, out);  // 100 px apart
  ASSERT_EQ(out.size(), 5u);
  for (const auto& b : out) {
    EXPECT_EQ(b.count, 1);
    EXPECT_NEAR(b.x1 - b.x0, 1, 1e-9);
  }
}

TEST(VisibleBlocks, WorkIsBoundedByPixelsNotSpans) {
  // A million 1 ns ops spaced 2 ns apart over 2 ms drawn on 1,000 px: few blocks.
  std::vector<result::Span> spans;
  spans.reserve(1'000'000);
  for (int i = 0; i < 1'000'000; ++i) {
    spans.push_back(
        make_span(SpanKind::all_reduce, Stream::collective, i * 2e-9, i * 2e-9 + 1e-9, i));
  }
  std::vector<Block> out;
  visible_blocks(spans, all_of(spans), TimeView(0, 2e-6), 1000, 1, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].count, 1'000'000);
}

TEST(VisibleBlocks, FirstEndingAfter) {
  std::vector<result::Span> spans = {make_span(SpanKind::forward, Stream::compute, 0, 1),
                                     make_span(SpanKind::forward, Stream::compute, 1, 2),
                                     make_span(SpanKind::forward, Stream::compute, 3, 4)};
  const auto lane = all_of(spans);
  EXPECT_EQ(first_ending_after(spans, lane, -1), 0);
  EXPECT_EQ(first_ending_after(spans, lane, 1.0), 1);
  EXPECT_EQ(first_ending_after(spans, lane, 2.5), 2);
  EXPECT_EQ(first_ending_after(spans, lane, 4.0), 3);
}

}  // namespace
}  // namespace stratagem::viz
