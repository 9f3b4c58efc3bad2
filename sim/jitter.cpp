#include "sim/jitter.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace stratagem::sim {

namespace {
double pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
double cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}
}  // namespace

Arrival expected_latest(const std::vector<Arrival>& arrivals) {
  if (arrivals.empty()) return {};
  // Times relative to the latest mean, so the second moments do not cancel at large times.
  double ref = arrivals[0].mean_s;
  for (const Arrival& a : arrivals) ref = std::max(ref, a.mean_s);
  double mean = arrivals[0].mean_s - ref, var = arrivals[0].variance_s2;
  for (std::size_t i = 1; i < arrivals.size(); ++i) {
    const double bm = arrivals[i].mean_s - ref, bv = arrivals[i].variance_s2;
    const double theta = std::sqrt(var + bv);
    if (theta <= 0) {
      if (bm > mean) {
        mean = bm;
        var = bv;
      }
      continue;
    }
    const double alpha = (mean - bm) / theta;
    const double p = cdf(alpha), q = cdf(-alpha), f = pdf(alpha);
    const double m1 = mean * p + bm * q + theta * f;
    const double m2 = (mean * mean + var) * p + (bm * bm + bv) * q + (mean + bm) * theta * f;
    mean = m1;
    var = std::max(0.0, m2 - m1 * m1);
  }
  return {ref + std::max(mean, 0.0), var};
}

Arrival expected_latest_of_copies(const Arrival& a, int n) {
  if (n <= 1 || a.variance_s2 <= 0) return a;
  // The latest of n standard normals, one member at a time (kept per n: a folded plan asks
  // for the same group sizes at every collective), then scaled.
  thread_local std::unordered_map<int, Arrival> standard;
  auto it = standard.find(n);
  if (it == standard.end()) {
    std::vector<Arrival> pair(2, Arrival{0, 1});
    for (int k = 2; k <= n; ++k) pair[0] = expected_latest(pair);
    it = standard.emplace(n, pair[0]).first;
  }
  const double sd = std::sqrt(a.variance_s2);
  return {a.mean_s + sd * it->second.mean_s, a.variance_s2 * it->second.variance_s2};
}

}  // namespace stratagem::sim
