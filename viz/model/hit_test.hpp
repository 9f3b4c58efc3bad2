#pragma once
// Which op is under the mouse. Answers from the same blocks the timeline draws (merged
// blocks included), so a tooltip always describes what the user points at.
#include "viz/model/aggregate.hpp"
#include "viz/model/layout.hpp"

namespace stratagem::viz {

struct Hit {
  int row = -1;
  int rank = -1;
  int lane = -1;  ///< index into doc.lanes(rank)
  int span = -1;  ///< index into doc.spans(rank) of the block's first span; -1: empty lane
  int count = 0;  ///< spans in the block (> 1: merged)
  Block block;
};

/// `x_px` from the drawing area's left edge, `y` from the top of the timeline content.
/// `min_px` must be the value the drawing uses.
Hit hit_test(const Document& doc, const TimelineLayout& layout, const TimeView& view,
             double width_px, double min_px, double x_px, float y);

}  // namespace stratagem::viz
