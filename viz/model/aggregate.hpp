#pragma once
// What to draw of one lane at the current zoom: the spans that intersect the visible time
// range, with runs of spans narrower than a pixel merged into one block. Work per lane is
// bounded by the lane's width in pixels (each merged block covers at least `min_px`; the
// next span is found by binary search), not by the number of spans, so a zoomed-out
// 1,024-rank step draws as fast as a zoomed-in one.
#include <span>
#include <vector>

#include "engine/result/result.hpp"
#include "viz/model/time_axis.hpp"

namespace stratagem::viz {

struct Block {
  double x0 = 0, x1 = 0;  ///< pixels from the drawing area's left edge (may lie outside it)
  int first = 0;          ///< position in the lane of the first span it holds
  int count = 1;          ///< spans it holds (> 1: merged)
  result::SpanKind kind = result::SpanKind::forward;  ///< kind of its first span
};

/// Blocks of the lane `lane` (indices into `spans`, sorted by start, non-overlapping)
/// visible in [0, width_px). A span narrower than `min_px` starts a merged block that takes
/// every following span starting less than `min_px` after the block's end.
void visible_blocks(std::span<const result::Span> spans, std::span<const int> lane,
                    const TimeView& view, double width_px, double min_px, std::vector<Block>& out);

/// Position in `lane` of the first span ending after `t_s` (lane.size() when none).
int first_ending_after(std::span<const result::Span> spans, std::span<const int> lane, double t_s);

}  // namespace stratagem::viz
