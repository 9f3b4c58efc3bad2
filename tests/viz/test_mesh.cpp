// Tensor parallelism in the viewer: mesh coordinates, rows grouped by tensor-parallel group,
// the tp lane and its colours, and collectives named by their group.
#include <gtest/gtest.h>

#include <set>

#include "tests/viz/viz_test_util.hpp"
#include "viz/model/colors.hpp"
#include "viz/model/layout.hpp"
#include "viz/model/mesh.hpp"
#include "viz/model/sim_worker.hpp"

namespace stratagem::viz {
namespace {

using result::SpanKind;

std::vector<const Row*> rows_of(const TimelineLayout& l, Row::Kind kind) {
  std::vector<const Row*> out;
  for (const auto& r : l.rows) {
    if (r.kind == kind) out.push_back(&r);
  }
  return out;
}

TEST(Mesh, CoordinatesFollowMegatronsRankOrder) {
  const Document doc(test::simulate_unfolded(test::tp_scenario(2, 2, 2)), "t");
  const Mesh& m = doc.mesh();
  EXPECT_EQ(m.dp, 2);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.pp, 2);
  ASSERT_EQ(m.coords.size(), 8u);
  // rank = (stage · dp + dp_index) · tp + tp_index
  for (int rank = 0; rank < 8; ++rank) {
    const MeshCoord& c = m.coords[rank];
    EXPECT_EQ(c.tp, rank % 2) << rank;
    EXPECT_EQ(c.dp, (rank / 2) % 2) << rank;
    EXPECT_EQ(c.stage, rank / 4) << rank;
    EXPECT_EQ(m.rank_of(c.stage, c.dp, c.tp), rank);
  }
  EXPECT_EQ(rank_label(m, 5), "rank 5 · stage 1 · dp 0 · tp 1");
  EXPECT_EQ(tp_group_label(m, 7), "tp(stage 1, dp 1)");
  EXPECT_EQ(tp_group_ranks(m, 7), "ranks 6..7");
}

// With context parallelism the result records each rank's tp and cp index (the mesh's
// dp × tp × pp is not the rank count, so they cannot come from a dp × tp × pp order).
TEST(Mesh, ContextParallelResultsShowEachRanksTensorParallelIndex) {
  nlohmann::json j = scenario::to_json(test::tp_scenario(2, 2, 1));
  j["strategy"]["cp"] = 2;
  j["cluster"]["gpus_per_node"] = 8;
  const scenario::Scenario s = scenario::parse_scenario(j);
  const Document doc(test::simulate_unfolded(s), "tp2 cp2");
  const Mesh& m = doc.mesh();
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.cp, 2);
  ASSERT_EQ(m.coords.size(), 8u);
  std::set<int> tps, cps;
  for (int rank = 0; rank < 8; ++rank) {
    const MeshCoord& c = m.coords[rank];
    tps.insert(c.tp);
    cps.insert(c.cp);
    // tp fastest, then cp, then dp.
    EXPECT_EQ(c.tp, rank % 2) << rank;
    EXPECT_EQ(c.cp, (rank / 2) % 2) << rank;
    EXPECT_EQ(c.dp, rank / 4) << rank;
    EXPECT_EQ(m.rank_of(c.stage, c.dp, c.tp, c.cp), rank);
  }
  EXPECT_EQ(tps, (std::set<int>{0, 1}));
  EXPECT_EQ(cps, (std::set<int>{0, 1}));
  EXPECT_EQ(rank_label(m, 3), "rank 3 · stage 0 · dp 0 · tp 1");
  EXPECT_EQ(tp_group_ranks(m, 3), "ranks 2..3");
  // The coordinates travel through the result file.
  const Mesh reread = mesh_of(result::result_from_json(result::to_json(doc.result())));
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(reread.coords[rank].tp, m.coords[rank].tp) << rank;
    EXPECT_EQ(reread.coords[rank].cp, m.coords[rank].cp) << rank;
  }
}

TEST(Mesh, WithoutTensorParallelismRanksKeepTheirShortLabel) {
  const auto doc = simulate(test::gpipe4_scenario(), "gpipe");
  EXPECT_FALSE(doc->mesh().tensor_parallel());
  EXPECT_EQ(rank_label(doc->mesh(), 3), "rank 3");
  EXPECT_EQ(doc->mesh().coords[3].stage, 3);
  // A hand-built result whose scenario does not describe its ranks: recorded coordinates.
  result::RunResult r;
  for (int rank = 0; rank < 3; ++rank) {
    result::RankResult rr;
    rr.rank = rank;
    rr.stage = rank;
    r.ranks.push_back(rr);
  }
  const Mesh m = mesh_of(r);
  EXPECT_EQ(m.tp, 1);
  EXPECT_EQ(m.pp, 3);
  EXPECT_EQ(m.coords[2].stage, 2);
  EXPECT_EQ(m.coords[2].tp, 0);
}

TEST(Layout, TensorParallelPeersSitTogetherUnderTheirGroupsHeader) {
  const Document doc(test::simulate_unfolded(test::tp_scenario(2, 2, 2)), "t");
  const TimelineLayout l = layout_timeline(doc);
  const auto headers = rows_of(l, Row::Kind::group);
  ASSERT_EQ(headers.size(), 4u) << "one header per (stage, dp) tensor-parallel group";
  EXPECT_EQ(headers[0]->label, "node 0 · stage 0 · dp 0 · tensor-parallel ranks 0..1");
  EXPECT_EQ(headers[1]->label, "node 0 · stage 0 · dp 1 · tensor-parallel ranks 2..3");
  EXPECT_EQ(headers[3]->label, "node 0 · stage 1 · dp 1 · tensor-parallel ranks 6..7");
  EXPECT_EQ(headers[3]->stage, 1);
  EXPECT_EQ(headers[3]->dp, 1);
  // Each header is followed by its group's TP peers, tp index 0 first.
  ASSERT_EQ(l.rows.size(), 12u);
  for (int g = 0; g < 4; ++g) {
    const Row& h = l.rows[3 * g];
    ASSERT_EQ(h.kind, Row::Kind::group);
    for (int t = 0; t < 2; ++t) {
      const Row& r = l.rows[3 * g + 1 + t];
      ASSERT_EQ(r.kind, Row::Kind::rank);
      EXPECT_EQ(r.rank, 2 * g + t);
      EXPECT_EQ(r.stage, h.stage);
      EXPECT_EQ(r.dp, h.dp);
      EXPECT_EQ(r.tp, t);
    }
  }
  EXPECT_EQ(l.rows[l.row_of_rank(6)].label, "rank 6 · stage 1 · dp 1 · tp 0");
  ASSERT_GE(l.widest_label, 0);
  EXPECT_EQ(l.rows[l.widest_label].kind, Row::Kind::rank);
}

TEST(Layout, FoldedTensorParallelPeersShowTheirRepresentative) {
  // Folding builds dp 0, tp 0 of each stage; the others are the same as it.
  const auto doc = simulate(test::tp_scenario(2, 2, 2), "t");
  const auto& ranks = doc->result().ranks;
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(doc->resolved_rank(rank), rank / 4 * 4) << rank;
    EXPECT_EQ(ranks[rank].same_as >= 0, rank % 4 != 0) << rank;
  }
  // Shown one row per rank: the same TP groups, folded peers drawing their representative's.
  const TimelineLayout all = layout_timeline(*doc);
  EXPECT_EQ(rows_of(all, Row::Kind::group).size(), 4u);
  EXPECT_EQ(rows_of(all, Row::Kind::rank).size(), 8u);
  EXPECT_EQ(&doc->lanes(3), &doc->lanes(0));
  // One row per replica group: a row per stage standing for its dp × tp ranks.
  LayoutOptions o;
  o.collapse_replicas = true;
  const TimelineLayout l = layout_timeline(*doc, o);
  ASSERT_EQ(l.rows.size(), 4u);
  EXPECT_EQ(l.rows[0].label, "node 0 · stage 0");
  EXPECT_EQ(l.rows[1].rank, 0);
  EXPECT_EQ(l.rows[1].replicas, 4);
  EXPECT_EQ(l.rows[1].label, "rank 0 ×4 (dp 2 × tp 2)");
  EXPECT_EQ(l.rows[2].label, "node 0 · stage 1");
  EXPECT_EQ(l.rows[3].label, "rank 4 ×4 (dp 2 × tp 2)");
  EXPECT_EQ(l.row_of_rank(5), -1);
}

TEST(Lanes, TensorParallelCollectivesHaveTheirOwnLaneAndColours) {
  for (const bool sp : {false, true}) {
    const Document doc(test::simulate_unfolded(test::tp_scenario(1, 2, 1, sp)), "t");
    for (int rank = 0; rank < doc.world(); ++rank) {
      int tp_lanes = 0;
      std::set<SpanKind> kinds;
      for (const Lane& lane : doc.lanes(rank)) {
        for (int i : lane.spans) {
          const result::Span& s = doc.spans(rank)[i];
          // Tensor-parallel collectives are on the tp lane and nowhere else.
          EXPECT_EQ(lane.stream == plan::Stream::tp, is_tensor_parallel(s));
          if (lane.stream != plan::Stream::tp) continue;
          EXPECT_TRUE(result::is_collective(s.kind));
          EXPECT_EQ(span_color(s), tp_kind_color(s.kind));
          EXPECT_NE(span_color(s), kind_color(s.kind));
          kinds.insert(s.kind);
        }
        tp_lanes += lane.stream == plan::Stream::tp;
      }
      EXPECT_GE(tp_lanes, 1) << "rank " << rank << " has no tp lane";
      if (sp) {
        // Sequence parallelism: all-gather before, reduce-scatter after each TP region.
        EXPECT_TRUE(kinds.count(SpanKind::all_gather) && kinds.count(SpanKind::reduce_scatter));
      } else {
        EXPECT_TRUE(kinds.count(SpanKind::all_reduce));
        EXPECT_FALSE(kinds.count(SpanKind::all_gather));
      }
    }
  }
}

TEST(Colors, TensorParallelColoursStandApart) {
  const auto legend = kind_legend();
  std::vector<Rgba> plain;
  for (const auto& e : legend) {
    if (!e.tensor_parallel) plain.push_back(e.color);
  }
  int tp_entries = 0;
  for (const auto& e : legend) {
    if (!e.tensor_parallel) continue;
    ++tp_entries;
    EXPECT_EQ(e.color, tp_kind_color(e.kind));
    EXPECT_EQ(e.label, std::string(result::to_string(e.kind)) + " (tp)");
    for (const Rgba& c : plain) EXPECT_NE(e.color, c) << e.label;
    for (const Rgba& f : {palette::kOom, palette::kBubble, palette::kCapacity, palette::kBackground,
                          palette::kHighlight, palette::kUpstream, palette::kDownstream})
      EXPECT_NE(e.color, f) << e.label;
  }
  EXPECT_EQ(tp_entries, 3);
  // A span is drawn in a tp colour when it is on the tp stream or of purpose tensor_parallel.
  result::Span s = test::make_span(SpanKind::all_reduce, plan::Stream::tp, 0, 1);
  s.purpose = plan::CommPurpose::sequence_parallel_grads;  // the SP norm-gradient sync
  EXPECT_EQ(span_color(s), tp_kind_color(SpanKind::all_reduce));
  s.stream = plan::Stream::collective;
  EXPECT_EQ(span_color(s), kind_color(SpanKind::all_reduce));
  s.purpose = plan::CommPurpose::tensor_parallel;
  EXPECT_EQ(span_color(s), tp_kind_color(SpanKind::all_reduce));
}

TEST(Mesh, CollectivesAreNamedByTheirTensorParallelGroup) {
  const Document doc(test::simulate_unfolded(test::tp_scenario(2, 2, 2)), "t");
  const result::Span* tp_span = nullptr;
  const result::Span* dp_span = nullptr;
  for (const auto& s : doc.spans(6)) {
    if (!tp_span && s.purpose == plan::CommPurpose::tensor_parallel) tp_span = &s;
    if (!dp_span && result::is_collective(s.kind) && !is_tensor_parallel(s)) dp_span = &s;
  }
  ASSERT_TRUE(tp_span);
  EXPECT_EQ(collective_summary(doc.mesh(), 6, *tp_span),
            std::string(result::to_string(tp_span->kind)) +
                " tensor_parallel over tp(stage 1, dp 1) · ranks 6..7");
  ASSERT_TRUE(dp_span) << "dp 2 synchronises gradients";
  EXPECT_EQ(
      collective_summary(doc.mesh(), 6, *dp_span),
      std::string(result::to_string(dp_span->kind)) + " " + plan::to_string(dp_span->purpose));
}

}  // namespace
}  // namespace stratagem::viz
