#include "viz/model/mesh.hpp"

#include <algorithm>

namespace stratagem::viz {

Mesh mesh_of(const result::RunResult& r) {
  Mesh m;
  const auto& st = r.scenario.strategy;
  const int n = static_cast<int>(r.ranks.size());
  const bool known = st.dp >= 1 && st.tp >= 1 && st.pp >= 1 && st.cp >= 1 &&
                     static_cast<long long>(st.dp) * st.tp * st.cp * st.pp == n;
  if (known) {
    m.dp = st.dp;
    m.tp = st.tp;
    m.pp = st.pp;
    m.cp = st.cp;
  }
  const bool recorded = std::any_of(r.ranks.begin(), r.ranks.end(),
                                    [](const auto& rr) { return rr.tp > 0 || rr.cp > 0; });
  const bool from_order = known && !recorded && (m.tp > 1 || m.cp > 1);
  const scenario::MeshShape shape{m.dp, m.pp, m.tp, m.cp};
  m.coords.resize(n);
  for (int i = 0; i < n; ++i) {
    const auto& rr = r.ranks[i];
    auto& c = m.coords[i];
    c.stage = rr.stage;
    c.dp = rr.dp;
    c.node = rr.node;
    const scenario::MeshCoord ordered =
        from_order ? shape.coord_of(rr.rank) : scenario::MeshCoord{};
    c.tp = !known ? 0 : from_order ? ordered.tp : rr.tp;
    c.cp = !known ? 0 : from_order ? ordered.cp : rr.cp;
    if (!known) {
      m.dp = std::max(m.dp, rr.dp + 1);
      m.pp = std::max(m.pp, rr.stage + 1);
    }
  }
  return m;
}

std::string rank_label(const Mesh& mesh, int rank) {
  std::string out = "rank " + std::to_string(rank);
  if (!mesh.tensor_parallel() || rank < 0 || rank >= static_cast<int>(mesh.coords.size())) {
    return out;
  }
  const auto& c = mesh.coords[rank];
  return out + " · stage " + std::to_string(c.stage) + " · dp " + std::to_string(c.dp) + " · tp " +
         std::to_string(c.tp);
}

std::string tp_group_label(const Mesh& mesh, int rank) {
  const auto& c = mesh.coords.at(rank);
  return "tp(stage " + std::to_string(c.stage) + ", dp " + std::to_string(c.dp) + ")";
}

std::string tp_group_ranks(const Mesh& mesh, int rank) {
  const int first = rank - mesh.coords.at(rank).tp;
  return "ranks " + std::to_string(first) + ".." + std::to_string(first + mesh.tp - 1);
}

bool is_tensor_parallel(const result::Span& s) {
  return s.stream == plan::Stream::tp ||
         (result::is_collective(s.kind) && s.purpose == plan::CommPurpose::tensor_parallel);
}

std::string collective_summary(const Mesh& mesh, int rank, const result::Span& s) {
  std::string out = std::string(result::to_string(s.kind)) + " " + plan::to_string(s.purpose);
  if (is_tensor_parallel(s) && mesh.tensor_parallel() && rank >= 0 &&
      rank < static_cast<int>(mesh.coords.size())) {
    out += " over " + tp_group_label(mesh, rank) + " · " + tp_group_ranks(mesh, rank);
  }
  return out;
}

}  // namespace stratagem::viz
