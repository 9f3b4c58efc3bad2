#include <gtest/gtest.h>

#include "engine/scenario/units.hpp"
#include "viz/model/colors.hpp"
#include "viz/model/compare.hpp"

namespace stratagem::viz {
namespace {

std::shared_ptr<Document> doc(const std::string& label, double step_s, double tokens_per_s,
                              double peak_gib, bool oom) {
  result::RunResult r;
  r.metrics.step_time_s = step_s;
  r.metrics.tokens_per_s = tokens_per_s;
  r.metrics.mfu = 0.4;
  result::RankResult rr;
  rr.peak_memory_bytes = peak_gib * units::kGiB;
  rr.capacity_bytes = 80 * units::kGiB;
  rr.oom = oom;
  r.ranks.push_back(rr);
  return std::make_shared<Document>(r, label);
}

TEST(Compare, BarsAreRelativeToTheLargestAndKnowWhichIsBest) {
  const std::vector<std::shared_ptr<Document>> docs = {doc("ddp", 2.0, 1000, 90, true),
                                                       doc("zero3", 2.5, 800, 30, false)};
  auto step = compare_bars(docs, CompareMetric::step_time);
  ASSERT_EQ(step.size(), 2u);
  EXPECT_DOUBLE_EQ(step[0].fraction, 0.8);
  EXPECT_DOUBLE_EQ(step[1].fraction, 1.0);
  EXPECT_TRUE(step[0].best);  // lower is better
  EXPECT_FALSE(step[1].best);
  auto tokens = compare_bars(docs, CompareMetric::tokens_per_s);
  EXPECT_TRUE(tokens[0].best);  // higher is better
  auto mem = compare_bars(docs, CompareMetric::peak_memory);
  EXPECT_DOUBLE_EQ(mem[0].value, 90 * units::kGiB);
  EXPECT_TRUE(mem[1].best);
  auto mfu = compare_bars(docs, CompareMetric::mfu);
  EXPECT_TRUE(mfu[0].best && mfu[1].best);  // ties are all best
  EXPECT_TRUE(docs[0]->any_oom());
  EXPECT_FALSE(docs[1]->any_oom());
}

TEST(Compare, Formatting) {
  EXPECT_EQ(format_metric(CompareMetric::mfu, 0.4567), "45.7 %");
  EXPECT_EQ(format_metric(CompareMetric::step_time, 0.3), "300 ms");
  EXPECT_EQ(format_metric(CompareMetric::tokens_per_s, 54577.4), "54577");
  EXPECT_EQ(format_metric(CompareMetric::peak_memory, 43.2 * units::kGiB), "43.2 GiB");
}

TEST(Colors, KindsAndClassesAreDistinctAndNeverTheFixedColours) {
  const auto kinds = kind_legend();
  // Every kind, then the tensor-parallel all-reduce, all-gather and reduce-scatter.
  ASSERT_EQ(kinds.size(), static_cast<std::size_t>(result::kSpanKindCount) + 3);
  const Rgba fixed[] = {palette::kOom, palette::kBubble, palette::kCapacity, palette::kBackground};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    for (std::size_t j = i + 1; j < kinds.size(); ++j) EXPECT_NE(kinds[i].color, kinds[j].color);
    for (const Rgba& f : fixed) EXPECT_NE(kinds[i].color, f) << kinds[i].label;
  }
  const auto classes = tensor_class_legend();
  ASSERT_EQ(classes.size(), static_cast<std::size_t>(plan::kTensorClassCount));
  for (std::size_t i = 0; i < classes.size(); ++i) {
    for (std::size_t j = i + 1; j < classes.size(); ++j)
      EXPECT_NE(classes[i].color, classes[j].color);
    for (const Rgba& f : fixed) EXPECT_NE(classes[i].color, f) << classes[i].label;
  }
  EXPECT_EQ(pack(Rgba{1, 2, 3, 4}), 0x04030201u);
}

}  // namespace
}  // namespace stratagem::viz
