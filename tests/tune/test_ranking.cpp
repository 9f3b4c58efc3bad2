// The pairwise order metric of validate --measured (tune/ranking.hpp): pairs within a setting,
// the 5 % gap, step times ordered the other way, Kendall's tau.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/scenario/scenario.hpp"
#include "tune/ranking.hpp"

namespace stratagem::tune {
namespace {

MeasuredRun run(const std::string& id, int seq_len) {
  nlohmann::json j = {{"model", "gpt2"},
                      {"cluster", "dgx-a100-80gb"},
                      {"strategy", {{"dp", 8}, {"micro_batch_size", 4}}},
                      {"training", {{"seq_len", seq_len}, {"global_batch", 32}}}};
  return MeasuredRun{id, scenario::parse_scenario(j), 0, 0, {}};
}

RunComparison row(double measured, double predicted, bool step_time = false) {
  RunComparison r;
  r.measured = measured;
  r.predicted = predicted;
  r.measured_is_step_time = step_time;
  return r;
}

TEST(Ranking, PairsWithinASettingOrderedAsTheyMeasure) {
  // Setting s1024: measured 100, 104, 120 (tokens/s); predicted 90, 95, 80.
  // Pairs over 5 %: (100, 120) and (104, 120), both ordered wrong; (100, 104) is within 5 %
  // and only counts for tau: concordant. Tau = (1 − 2) / 3.
  // Setting s256 (step times): measured 1.0 s and 2.0 s (throughputs 1 and 0.5), predicted
  // 1.1 and 1.9: ordered right, concordant. The lone s512 run forms no pair.
  const std::vector<MeasuredRun> runs = {run("a", 1024), run("b", 1024), run("c", 1024),
                                         run("d", 256),  run("e", 256),  run("f", 512)};
  const std::vector<RunComparison> rows = {row(100, 90),        row(104, 95),        row(120, 80),
                                           row(1.0, 1.1, true), row(2.0, 1.9, true), row(50, 50)};
  const Ranking r = rank_pairs(runs, rows);
  ASSERT_EQ(r.settings.size(), 2u);
  const PairOrder& s1024 = r.settings[0].order;
  EXPECT_EQ(r.settings[0].runs, 3);
  EXPECT_EQ(s1024.pairs, 2);
  EXPECT_EQ(s1024.ordered_right, 0);
  EXPECT_EQ(s1024.all_pairs, 3);
  EXPECT_DOUBLE_EQ(s1024.kendall_tau(), -1.0 / 3);
  const PairOrder& s256 = r.settings[1].order;
  EXPECT_EQ(s256.pairs, 1);
  EXPECT_EQ(s256.ordered_right, 1);
  EXPECT_DOUBLE_EQ(s256.kendall_tau(), 1.0);
  EXPECT_EQ(r.overall.pairs, 3);
  EXPECT_EQ(r.overall.ordered_right, 1);
  EXPECT_DOUBLE_EQ(r.overall.share(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(r.overall.kendall_tau(), 0.0);  // (2 − 2) / 4
  EXPECT_THROW(rank_pairs(runs, {rows.begin(), rows.end() - 1}), std::invalid_argument);
}

}  // namespace
}  // namespace stratagem::tune
