#include <gtest/gtest.h>

#include "engine/result/metrics.hpp"
#include "tests/viz/viz_test_util.hpp"
#include "viz/model/hit_test.hpp"
#include "viz/model/layout.hpp"

namespace stratagem::viz {
namespace {

using plan::Stream;
using result::SpanKind;
using test::make_span;

// 2 nodes × 2 GPUs, pp = 2, dp = 2: ranks 0-1 stage 0 (node 0), ranks 2-3 stage 1 (node 1).
// Rank 1 and 3 are folded into 0 and 2.
result::RunResult two_stage_result() {
  result::RunResult r;
  for (int rank = 0; rank < 4; ++rank) {
    result::RankResult rr;
    rr.rank = rank;
    rr.stage = rank / 2;
    rr.node = rank / 2;
    rr.dp = rank % 2;
    rr.same_as = rank % 2 == 1 ? rank - 1 : -1;
    r.ranks.push_back(rr);
  }
  auto& s0 = r.ranks[0].spans;
  s0.push_back(make_span(SpanKind::forward, Stream::compute, 0.0, 1.0, 0, 0));
  s0.push_back(make_span(SpanKind::send, Stream::p2p, 1.0, 1.5, 1, 0));
  s0.push_back(make_span(SpanKind::forward, Stream::compute, 1.0, 2.0, 2, 1));
  s0.push_back(make_span(SpanKind::send, Stream::p2p, 1.2, 2.5, 3, 1));  // overlaps the first send
  s0.push_back(make_span(SpanKind::backward, Stream::compute, 3.0, 5.0, 4, 0));
  auto& s2 = r.ranks[2].spans;
  s2.push_back(make_span(SpanKind::recv, Stream::p2p, 0.0, 1.5, 10, 0));
  s2.push_back(make_span(SpanKind::forward, Stream::compute, 1.5, 2.5, 11, 0));
  s2.push_back(make_span(SpanKind::backward, Stream::compute, 2.5, 4.5, 12, 0));
  s2.push_back(make_span(SpanKind::all_reduce, Stream::collective, 4.5, 5.5, 13));
  return r;
}

TEST(Lanes, OneLanePerStreamAndMoreWhereSpansOverlap) {
  const Document doc(two_stage_result(), "t");
  const auto& l0 = doc.lanes(0);
  ASSERT_EQ(l0.size(), 3u);  // compute, p2p, p2p (the two sends overlap)
  EXPECT_EQ(l0[0].stream, Stream::compute);
  EXPECT_EQ(l0[0].spans, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(l0[1].stream, Stream::p2p);
  EXPECT_EQ(l0[1].sub, 0);
  EXPECT_EQ(l0[1].spans, (std::vector<int>{1}));
  EXPECT_EQ(l0[2].sub, 1);
  EXPECT_EQ(l0[2].spans, (std::vector<int>{3}));
  // A folded replica shows its representative's lanes.
  EXPECT_EQ(&doc.lanes(1), &doc.lanes(0));
  EXPECT_EQ(doc.lanes(2).size(), 3u);  // compute, collective, p2p
}

TEST(Document, BubbleFractionPerRankAgainstTheLastModelCompute) {
  const Document doc(two_stage_result(), "t");
  // Model compute ends at 5.0 on rank 0. Rank 0 computes 4.0 of it, rank 2 3.0.
  EXPECT_DOUBLE_EQ(doc.summary(0).bubble_fraction, 1 - 4.0 / 5.0);
  EXPECT_DOUBLE_EQ(doc.summary(2).bubble_fraction, 1 - 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(doc.summary(3).bubble_fraction, doc.summary(2).bubble_fraction);
  EXPECT_DOUBLE_EQ(doc.end_s(), 5.5);
}

TEST(Layout, GroupsByNodeAndStageWithALanePerStream) {
  const Document doc(two_stage_result(), "t");
  LayoutOptions o;  // lanes 18 + gap 2, rows 6 apart, headers 18
  const TimelineLayout l = layout_timeline(doc, o);
  ASSERT_EQ(l.rows.size(), 6u);
  EXPECT_EQ(l.rows[0].kind, Row::Kind::group);
  EXPECT_EQ(l.rows[0].label, "node 0 · stage 0");
  EXPECT_EQ(l.rows[1].rank, 0);
  EXPECT_EQ(l.rows[1].lanes, 3);
  EXPECT_FLOAT_EQ(l.rows[1].y, 18);
  EXPECT_FLOAT_EQ(l.rows[1].height, 3 * 20 - 2);
  EXPECT_EQ(l.rows[2].rank, 1);
  EXPECT_FLOAT_EQ(l.rows[2].y, 18 + 58 + 6);
  EXPECT_EQ(l.rows[3].label, "node 1 · stage 1");
  EXPECT_FLOAT_EQ(l.rows[3].y, 18 + 2 * 64);
  EXPECT_FLOAT_EQ(l.height, 2 * 18 + 4 * 64);

  EXPECT_EQ(l.row_at(0), 0);
  EXPECT_EQ(l.row_at(18), 1);
  EXPECT_EQ(l.row_at(18 + 59), 1);  // the gap below a row belongs to it
  EXPECT_EQ(l.row_at(82), 2);
  EXPECT_EQ(l.row_at(-1), -1);
  EXPECT_EQ(l.row_at(l.height), -1);
  EXPECT_EQ(l.lane_at(l.rows[1], 18 + 0), 0);
  EXPECT_EQ(l.lane_at(l.rows[1], 18 + 19), -1);  // the 2 px between lanes
  EXPECT_EQ(l.lane_at(l.rows[1], 18 + 20), 1);
  EXPECT_EQ(l.lane_at(l.rows[1], 18 + 45), 2);
  EXPECT_EQ(l.lane_at(l.rows[0], 5), -1);  // a header has no lanes

  const auto [first, last] = l.rows_between(85, 150);
  EXPECT_EQ(first, 2);
  EXPECT_EQ(last, 4);
  EXPECT_EQ(l.row_of_rank(2), 4);
}

TEST(Layout, CollapsedReplicasShareARow) {
  const Document doc(two_stage_result(), "t");
  LayoutOptions o;
  o.collapse_replicas = true;
  const TimelineLayout l = layout_timeline(doc, o);
  ASSERT_EQ(l.rows.size(), 4u);
  EXPECT_EQ(l.rows[1].rank, 0);
  EXPECT_EQ(l.rows[1].replicas, 2);
  EXPECT_EQ(l.rows[1].label, "rank 0 ×2");
  EXPECT_EQ(l.row_of_rank(1), -1);
}

TEST(HitTest, FindsTheOpUnderTheMouse) {
  const Document doc(two_stage_result(), "t");
  const TimelineLayout l = layout_timeline(doc);
  const TimeView v(0, 0.01);  // 100 px per second
  // Rank 0's compute lane (y 18..36): forward mb 1 spans x 100..200.
  Hit h = hit_test(doc, l, v, 600, 1, 150, 20);
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.lane, 0);
  ASSERT_EQ(h.span, 2);
  EXPECT_EQ(doc.spans(0)[h.span].microbatch, 1);
  EXPECT_EQ(h.count, 1);
  // Idle time between forward and backward: a lane but no op.
  h = hit_test(doc, l, v, 600, 1, 250, 20);
  EXPECT_EQ(h.lane, 0);
  EXPECT_EQ(h.span, -1);
  // Rank 0's second p2p lane (y 58..76) holds the overlapping send.
  h = hit_test(doc, l, v, 600, 1, 200, 60);
  EXPECT_EQ(h.span, 3);
  // Folded rank 1 (y 82..): its representative's spans.
  h = hit_test(doc, l, v, 600, 1, 50, 85);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(h.span, 0);
  // Outside the drawing area.
  EXPECT_EQ(hit_test(doc, l, v, 600, 1, 650, 20).span, -1);
}

}  // namespace
}  // namespace stratagem::viz

namespace stratagem::viz {
namespace {

TEST(Document, PerRankBubblesAverageToTheResultsBubble) {
  auto r = two_stage_result();
  r.metrics = result::compute_metrics(r, 0);
  const Document doc(r, "t");
  double sum = 0;
  for (int rank = 0; rank < doc.world(); ++rank) sum += doc.summary(rank).bubble_fraction;
  EXPECT_NEAR(sum / doc.world(), r.metrics.bubble_fraction, 1e-12);
  EXPECT_NEAR(r.metrics.bubble_fraction, (0.2 + 0.2 + 0.4 + 0.4) / 4, 1e-12);
}

}  // namespace
}  // namespace stratagem::viz
