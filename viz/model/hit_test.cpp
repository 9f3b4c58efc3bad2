#include "viz/model/hit_test.hpp"

namespace stratagem::viz {

Hit hit_test(const Document& doc, const TimelineLayout& layout, const TimeView& view,
             double width_px, double min_px, double x_px, float y) {
  Hit hit;
  hit.row = layout.row_at(y);
  if (hit.row < 0) return hit;
  const Row& row = layout.rows[hit.row];
  if (row.kind != Row::Kind::rank) return hit;
  hit.rank = row.rank;
  hit.lane = layout.lane_at(row, y);
  if (hit.lane < 0 || hit.lane >= static_cast<int>(doc.lanes(row.rank).size())) return hit;
  if (x_px < 0 || x_px >= width_px) return hit;
  const Lane& lane = doc.lanes(row.rank)[hit.lane];
  std::vector<Block> blocks;
  visible_blocks(doc.spans(row.rank), lane.spans, view, width_px, min_px, blocks);
  for (const Block& b : blocks) {
    if (x_px >= b.x0 && x_px < b.x1) {
      hit.span = lane.spans[b.first];
      hit.count = b.count;
      hit.block = b;
      break;
    }
  }
  return hit;
}

}  // namespace stratagem::viz
