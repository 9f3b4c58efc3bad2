#include "viz/model/compare.hpp"

#include <algorithm>
#include <cstdio>

#include "viz/model/time_axis.hpp"

namespace stratagem::viz {

MetricInfo metric_info(CompareMetric m) {
  switch (m) {
    case CompareMetric::step_time:
      return {"step time", false};
    case CompareMetric::tokens_per_s:
      return {"tokens/s", true};
    case CompareMetric::mfu:
      return {"MFU", true};
    case CompareMetric::bubble_fraction:
      return {"bubble fraction", false};
    case CompareMetric::exposed_comm:
      return {"exposed comm", false};
    case CompareMetric::peak_memory:
      return {"peak memory", false};
  }
  return {"?", false};
}

double metric_value(const Document& doc, CompareMetric m) {
  const auto& mt = doc.result().metrics;
  switch (m) {
    case CompareMetric::step_time:
      return mt.step_time_s;
    case CompareMetric::tokens_per_s:
      return mt.tokens_per_s;
    case CompareMetric::mfu:
      return mt.mfu;
    case CompareMetric::bubble_fraction:
      return mt.bubble_fraction;
    case CompareMetric::exposed_comm:
      return mt.exposed_comm_s;
    case CompareMetric::peak_memory:
      return doc.peak_memory_bytes();
  }
  return 0;
}

std::string format_metric(CompareMetric m, double value) {
  char buf[64];
  switch (m) {
    case CompareMetric::step_time:
    case CompareMetric::exposed_comm:
      return format_duration(value);
    case CompareMetric::tokens_per_s:
      std::snprintf(buf, sizeof buf, "%.0f", value);
      return buf;
    case CompareMetric::mfu:
    case CompareMetric::bubble_fraction:
      std::snprintf(buf, sizeof buf, "%.1f %%", 100 * value);
      return buf;
    case CompareMetric::peak_memory:
      return format_bytes(value);
  }
  return "?";
}

std::string strategy_summary(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  std::string out = "dp " + std::to_string(st.dp);
  if (st.tp > 1) {
    out += " · tp " + std::to_string(st.tp) + (st.sequence_parallel ? " sp" : "");
  }
  out += " · pp " + std::to_string(st.pp);
  if (st.pp > 1) {
    out += std::string(" · ") + scenario::to_string(st.schedule);
    if (st.schedule == scenario::Schedule::interleaved) out += " ×" + std::to_string(st.chunks);
  }
  out += " · m " + std::to_string(st.grad_accum) + " · mbs " + std::to_string(st.micro_batch_size);
  out += std::string(" · ") + scenario::to_string(st.sharding);
  out += std::string(" · ") +
         (st.precision == scenario::Precision::no ? "fp32" : scenario::to_string(st.precision));
  if (st.recompute != scenario::Recompute::none) {
    out += std::string(" · recompute ") + scenario::to_string(st.recompute);
  }
  if (st.offload_optimizer == scenario::Offload::cpu) out += " · offload";
  return out;
}

std::vector<CompareBar> compare_bars(const std::vector<std::shared_ptr<Document>>& docs,
                                     CompareMetric m) {
  std::vector<CompareBar> bars;
  double largest = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const double v = metric_value(*docs[i], m);
    bars.push_back({i, v, 0, false});
    largest = std::max(largest, v);
  }
  if (bars.empty()) return bars;
  const bool higher = metric_info(m).higher_is_better;
  double best = bars[0].value;
  for (const auto& b : bars) best = higher ? std::max(best, b.value) : std::min(best, b.value);
  for (auto& b : bars) {
    b.fraction = largest > 0 ? b.value / largest : 0;
    b.best = b.value == best;
  }
  return bars;
}

}  // namespace stratagem::viz
