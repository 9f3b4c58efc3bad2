#pragma once
// The throughput comparison: the metrics the viewer compares across results, how each is
// read (higher or lower is better), its formatting, and bar lengths relative to the largest.
#include <memory>
#include <string>
#include <vector>

#include "viz/model/document.hpp"

namespace stratagem::viz {

enum class CompareMetric {
  step_time,
  tokens_per_s,
  mfu,
  bubble_fraction,
  exposed_comm,
  peak_memory
};
inline constexpr int kCompareMetricCount = 6;

struct MetricInfo {
  const char* title;
  bool higher_is_better;
};
MetricInfo metric_info(CompareMetric m);

double metric_value(const Document& doc, CompareMetric m);
std::string format_metric(CompareMetric m, double value);

struct CompareBar {
  std::size_t doc = 0;
  double value = 0;
  double fraction = 0;  ///< value / largest value among the documents (0..1)
  bool best = false;    ///< the best value of this metric (ties: all of them)
};

/// "dp 8 · pp 1 · 1f1b · m 8 · zero2 · bf16": the strategy in one line ("dp 2 · tp 8 sp ·
/// pp 4 · ..." under tensor parallelism, "sp" with sequence parallelism).
std::string strategy_summary(const scenario::Scenario& s);

/// One bar per document for metric `m`.
std::vector<CompareBar> compare_bars(const std::vector<std::shared_ptr<Document>>& docs,
                                     CompareMetric m);

}  // namespace stratagem::viz
