#include "viz/model/layout.hpp"

#include <algorithm>

namespace stratagem::viz {

namespace {

// "node 0 · stage 1", and under tensor parallelism per group "node 0 · stage 1 · dp 0 ·
// tensor-parallel ranks 8..15".
std::string group_label(const Mesh& mesh, int rank, bool per_tp_group) {
  const MeshCoord& c = mesh.coords[rank];
  std::string out = "node " + std::to_string(c.node) + " · stage " + std::to_string(c.stage);
  if (per_tp_group) {
    out += " · dp " + std::to_string(c.dp) + " · tensor-parallel " + tp_group_ranks(mesh, rank);
  }
  return out;
}

}  // namespace

TimelineLayout layout_timeline(const Document& doc, const LayoutOptions& options) {
  TimelineLayout out;
  out.options = options;
  const auto& ranks = doc.result().ranks;
  const Mesh& mesh = doc.mesh();
  // Per representative: how many ranks it stands for, and over how many dp and tp indices.
  std::vector<int> replicas(ranks.size(), 1), dp_span(ranks.size(), 1), tp_span(ranks.size(), 1);
  bool collapsing = false;
  if (options.collapse_replicas) {
    for (const auto& r : ranks) {
      if (r.same_as < 0) continue;
      collapsing = true;
      ++replicas.at(r.same_as);
      const MeshCoord& c = mesh.coords[r.rank];
      const MeshCoord& rep = mesh.coords[r.same_as];
      dp_span[r.same_as] = std::max(dp_span[r.same_as], c.dp - rep.dp + 1);
      tp_span[r.same_as] = std::max(tp_span[r.same_as], c.tp - rep.tp + 1);
    }
  }
  // A header per tensor-parallel group, unless its peers are collapsed into one row.
  const bool per_tp_group = mesh.tensor_parallel() && !collapsing;
  float y = 0;
  int prev_node = -1, prev_stage = -1, prev_dp = -1;
  std::size_t widest = 0;
  for (const auto& r : ranks) {
    if (options.collapse_replicas && r.same_as >= 0) continue;
    const MeshCoord& c = mesh.coords[r.rank];
    const int dp = per_tp_group ? c.dp : -1;
    if (r.node != prev_node || r.stage != prev_stage || dp != prev_dp) {
      Row g;
      g.kind = Row::Kind::group;
      g.node = r.node;
      g.stage = r.stage;
      g.dp = dp;
      g.y = y;
      g.height = options.header_height;
      g.label = group_label(mesh, r.rank, per_tp_group);
      y += g.height;
      out.rows.push_back(std::move(g));
      prev_node = r.node;
      prev_stage = r.stage;
      prev_dp = dp;
    }
    Row row;
    row.kind = Row::Kind::rank;
    row.rank = r.rank;
    row.node = r.node;
    row.stage = r.stage;
    row.dp = c.dp;
    row.tp = c.tp;
    row.replicas = replicas[r.rank];
    row.lanes = std::max<int>(1, static_cast<int>(doc.lanes(r.rank).size()));
    row.y = y;
    row.height =
        static_cast<float>(row.lanes) * (options.lane_height + options.lane_gap) - options.lane_gap;
    if (row.replicas > 1) {
      // "rank 0 ×2"; under tensor parallelism "rank 0 ×16 (dp 2 × tp 8)".
      row.label = "rank " + std::to_string(r.rank) + " ×" + std::to_string(row.replicas);
      if (mesh.tensor_parallel()) {
        row.label += " (dp " + std::to_string(dp_span[r.rank]) + " × tp " +
                     std::to_string(tp_span[r.rank]) + ")";
      }
    } else {
      row.label = rank_label(mesh, r.rank);
    }
    if (row.label.size() > widest) {
      widest = row.label.size();
      out.widest_label = static_cast<int>(out.rows.size());
    }
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
