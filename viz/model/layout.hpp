#pragma once
// Vertical layout of the timeline: a header row per (node, pipeline stage) group, then one
// row per rank holding one lane per stream in use. Under tensor parallelism the header is per
// tensor-parallel group (node, stage, dp index), so a group's TP peers sit together, and rank
// rows carry their mesh coordinate. Rows are found by y with a binary search, so drawing and
// hit-testing touch only what is on screen, even for thousands of ranks.
#include <string>
#include <utility>
#include <vector>

#include "viz/model/document.hpp"

namespace stratagem::viz {

struct LayoutOptions {
  float lane_height = 18;
  float lane_gap = 2;
  float row_gap = 6;
  float header_height = 18;
  /// Show one row for a rank and the folded replicas identical to it (its data-parallel
  /// replicas and, under tensor parallelism, their TP peers).
  bool collapse_replicas = false;
};

struct Row {
  enum class Kind { group, rank };
  Kind kind = Kind::rank;
  int rank = -1;  ///< rank rows
  int node = 0;
  int stage = 0;
  int dp = -1;       ///< data-parallel index; -1 for a group header spanning several
  int tp = 0;        ///< tensor-parallel index (rank rows)
  int replicas = 1;  ///< ranks the row stands for (> 1 when collapsed)
  int lanes = 0;     ///< lanes drawn (rank rows)
  float y = 0;       ///< top, from the top of the timeline content
  float height = 0;
  std::string label;
};

class TimelineLayout {
 public:
  std::vector<Row> rows;
  float height = 0;
  LayoutOptions options;
  int widest_label = -1;  ///< the rank row with the longest label (sizes the gutter), or -1

  /// Index of the row containing y, or -1 (gaps between rows belong to the row above).
  int row_at(float y) const;
  /// Rows overlapping [y0, y1): [first, last).
  std::pair<int, int> rows_between(float y0, float y1) const;
  float lane_top(const Row& row, int lane) const {
    return row.y + static_cast<float>(lane) * (options.lane_height + options.lane_gap);
  }
  /// Lane under y in a rank row, or -1 in a gap or outside.
  int lane_at(const Row& row, float y) const;
  /// The row of `rank`, or -1 when it is collapsed into another.
  int row_of_rank(int rank) const;
};

TimelineLayout layout_timeline(const Document& doc, const LayoutOptions& options = {});

/// The lane of `doc`'s `rank` with the same stream and sub-lane as `lane`, or -1.
int matching_lane(const Document& doc, int rank, const Lane& lane);

}  // namespace stratagem::viz
