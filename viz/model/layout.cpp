#include "viz/model/layout.hpp"

#include <algorithm>

namespace stratagem::viz {

TimelineLayout layout_timeline(const Document& doc, const LayoutOptions& options) {
  TimelineLayout out;
  out.options = options;
  const auto& ranks = doc.result().ranks;
  std::vector<int> replicas(ranks.size(), 1);
  if (options.collapse_replicas) {
    for (const auto& r : ranks) {
      if (r.same_as >= 0) ++replicas.at(r.same_as);
    }
  }
  float y = 0;
  int prev_node = -1, prev_stage = -1;
  for (const auto& r : ranks) {
    if (options.collapse_replicas && r.same_as >= 0) continue;
    if (r.node != prev_node || r.stage != prev_stage) {
      Row g;
      g.kind = Row::Kind::group;
      g.node = r.node;
      g.stage = r.stage;
      g.y = y;
      g.height = options.header_height;
      g.label = "node " + std::to_string(r.node) + " · stage " + std::to_string(r.stage);
      y += g.height;
      out.rows.push_back(std::move(g));
      prev_node = r.node;
      prev_stage = r.stage;
    }
    Row row;
    row.kind = Row::Kind::rank;
    row.rank = r.rank;
    row.node = r.node;
    row.stage = r.stage;
    row.replicas = replicas[r.rank];
    row.lanes = std::max<int>(1, static_cast<int>(doc.lanes(r.rank).size()));
    row.y = y;
    row.height =
        static_cast<float>(row.lanes) * (options.lane_height + options.lane_gap) - options.lane_gap;
    row.label = "rank " + std::to_string(r.rank);
    if (row.replicas > 1) row.label += " ×" + std::to_string(row.replicas);
    y += row.height + options.row_gap;
    out.rows.push_back(std::move(row));
  }
  out.height = y;
  return out;
}

int TimelineLayout::row_at(float y) const {
  if (rows.empty() || y < 0 || y >= height) return -1;
  auto it =
      std::upper_bound(rows.begin(), rows.end(), y, [](float v, const Row& r) { return v < r.y; });
  return static_cast<int>(it - rows.begin()) - 1;
}

std::pair<int, int> TimelineLayout::rows_between(float y0, float y1) const {
  const int n = static_cast<int>(rows.size());
  auto first =
      std::upper_bound(rows.begin(), rows.end(), y0, [](float v, const Row& r) { return v < r.y; });
  int f = std::max(0, static_cast<int>(first - rows.begin()) - 1);
  auto last =
      std::lower_bound(rows.begin(), rows.end(), y1, [](const Row& r, float v) { return r.y < v; });
  return {std::min(f, n), static_cast<int>(last - rows.begin())};
}

int TimelineLayout::lane_at(const Row& row, float y) const {
  if (row.kind != Row::Kind::rank) return -1;
  const float pitch = options.lane_height + options.lane_gap;
  const float dy = y - row.y;
  if (dy < 0) return -1;
  const int lane = static_cast<int>(dy / pitch);
  if (lane >= row.lanes || dy - static_cast<float>(lane) * pitch >= options.lane_height) return -1;
  return lane;
}

int TimelineLayout::row_of_rank(int rank) const {
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    if (rows[i].kind == Row::Kind::rank && rows[i].rank == rank) return i;
  }
  return -1;
}

int matching_lane(const Document& doc, int rank, const Lane& lane) {
  if (rank < 0 || rank >= doc.world()) return -1;
  const auto& lanes = doc.lanes(rank);
  for (int i = 0; i < static_cast<int>(lanes.size()); ++i) {
    if (lanes[i].stream == lane.stream && lanes[i].sub == lane.sub) return i;
  }
  return -1;
}

}  // namespace stratagem::viz
