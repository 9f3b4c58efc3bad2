#include "engine/result/metrics.hpp"

#include <algorithm>
#include <cmath>

namespace stratagem::result {

double union_length(std::vector<std::pair<double, double>> intervals) {
  // Ordered by begin is enough (the union does not depend on the order of equal begins);
  // a simulation's spans already are.
  const auto by_begin = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_begin)) {
    std::sort(intervals.begin(), intervals.end());
  }
  double total = 0, cur_begin = 0, cur_end = 0;
  bool open = false;
  for (const auto& [b, e] : intervals) {
    if (open && b <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_begin;
    cur_begin = b;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_begin;
  return total;
}

double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

double coefficient_of_variation(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  return mean == 0 ? 0 : sample_stddev(v) / std::abs(mean);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

struct RankStats {
  double model_busy_s = 0;
  double model_end_s = 0;
  double end_s = 0;
  double exposed_comm_s = 0;
  double comm_s = 0;
  std::array<double, kCommCategoryCount> comm_bytes{};
};

// Time during which communication runs and no compute does: a sweep over span boundaries.
double exposed_comm(const std::vector<Span>& spans) {
  struct Edge {
    double t;
    int comm, compute;
  };
  // The sum does not depend on the order of edges at one time (only the first at a time adds
  // to it, with the state before that time), so starts and ends are sorted apart and merged:
  // a result's spans come ordered by start already.
  std::vector<Edge> starts, ends, edges;
  starts.reserve(spans.size());
  ends.reserve(spans.size());
  for (const Span& s : spans) {
    const bool compute = is_compute(s.kind);
    starts.push_back({s.start_s, compute ? 0 : 1, compute ? 1 : 0});
    ends.push_back({s.end_s, compute ? 0 : -1, compute ? -1 : 0});
  }
  const auto by_time = [](const Edge& a, const Edge& b) { return a.t < b.t; };
  if (!std::is_sorted(starts.begin(), starts.end(), by_time)) {
    std::sort(starts.begin(), starts.end(), by_time);
  }
  std::sort(ends.begin(), ends.end(), by_time);
  edges.resize(starts.size() + ends.size());
  std::merge(starts.begin(), starts.end(), ends.begin(), ends.end(), edges.begin(), by_time);
  double exposed = 0, prev = 0;
  int comm = 0, compute = 0;
  for (const Edge& e : edges) {
    if (comm > 0 && compute == 0) exposed += e.t - prev;
    comm += e.comm;
    compute += e.compute;
    prev = e.t;
  }
  return exposed;
}

RankStats rank_stats(const RankResult& r) {
  RankStats st;
  std::vector<std::pair<double, double>> model, comm;
  for (const Span& s : r.spans) {
    st.end_s = std::max(st.end_s, s.end_s);
    if (!is_compute(s.kind)) comm.emplace_back(s.start_s, s.end_s);
    if (is_layer_work(s)) model.emplace_back(s.start_s, s.end_s);
    if (is_model_compute(s.kind)) {
      st.model_end_s = std::max(st.model_end_s, s.end_s);
    } else if (is_collective(s.kind)) {
      st.comm_bytes[static_cast<int>(comm_category(s.purpose))] += s.bytes;
    } else if (s.kind == SpanKind::send) {
      st.comm_bytes[static_cast<int>(CommCategory::pipeline)] += s.bytes;
    }
  }
  st.model_busy_s = union_length(std::move(model));
  st.comm_s = union_length(std::move(comm));
  st.exposed_comm_s = exposed_comm(r.spans);
  return st;
}

}  // namespace

Metrics compute_metrics(const RunResult& r, double model_flops_per_step) {
  const int world = static_cast<int>(r.ranks.size());
  // Statistics of the ranks with spans only (folded replicas share their representative's):
  // a million-GPU result has a few hundred.
  std::vector<int> slot(r.ranks.size(), -1);
  std::vector<RankStats> stats;
  for (int i = 0; i < world; ++i) {
    if (r.ranks[i].same_as >= 0) continue;
    slot[i] = static_cast<int>(stats.size());
    stats.push_back(rank_stats(r.ranks[i]));
  }
  Metrics m;
  m.model_flops_per_step = model_flops_per_step;
  double model_end = 0, busy_sum = 0, exposed_sum = 0, comm_sum = 0;
  for (int i = 0; i < world; ++i) {
    const int own = r.ranks[i].same_as >= 0 ? r.ranks[i].same_as : i;
    const RankStats& st = stats[static_cast<std::size_t>(slot[own])];
    m.step_time_s = std::max(m.step_time_s, st.end_s);
    model_end = std::max(model_end, st.model_end_s);
    busy_sum += st.model_busy_s;
    exposed_sum += st.exposed_comm_s;
    comm_sum += st.comm_s;
    for (int c = 0; c < kCommCategoryCount; ++c) m.comm_bytes[c] += st.comm_bytes[c];
  }
  const auto& s = r.scenario;
  // The peak the GEMMs aim at: tf32 for fp32 training with tf32; bf16 under fp8 (as people
  // quote fp8 MFU against the 16-bit peak).
  m.peak_flops.dtype =
      s.strategy.tf32 ? scenario::DType::tf32 : scenario::compute_dtype(s.strategy.precision);
  m.peak_flops.flops_per_s = s.cluster.gpu.peak(m.peak_flops.dtype);
  if (world > 0) {
    m.exposed_comm_s = exposed_sum / world;
    m.comm_s = comm_sum / world;
    // Busy time never exceeds the span it lies in; clamp the rounding of long sums at 0.
    if (model_end > 0) m.bubble_fraction = std::max(0.0, 1.0 - busy_sum / world / model_end);
  }
  if (m.step_time_s > 0) {
    m.samples_per_s = static_cast<double>(s.training.global_batch) / m.step_time_s;
    m.tokens_per_s = static_cast<double>(s.tokens_per_step()) / m.step_time_s;
    if (world > 0 && m.peak_flops.flops_per_s > 0) {
      m.mfu = model_flops_per_step / (m.step_time_s * world * m.peak_flops.flops_per_s);
    }
  }
  return m;
}

}  // namespace stratagem::result
