#include "engine/scenario/fit.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

namespace {

double rms_rel(const std::vector<double>& x, const std::vector<double>& y, double a, double b) {
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = (a + b * x[i] - y[i]) / y[i];
    sum += r * r;
  }
  return x.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(x.size()));
}

}  // namespace

LineFit fit_line_relative(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) {
    throw RuntimeError("fit: need at least two (x, y) points, got " + std::to_string(x.size()));
  }
  // Normal equations of Σ w (a + b x − y)², w = 1/y².
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(y[i] > 0) || !std::isfinite(y[i]) || !std::isfinite(x[i])) {
      throw RuntimeError("fit: y must be finite and > 0 (point " + std::to_string(i) + ")");
    }
    const double w = 1.0 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  const double det = sw * sxx - sx * sx;
  if (!(std::abs(det) > 1e-300 * sw * sxx) || det <= 0) {
    throw RuntimeError("fit: the x values must not all be equal");
  }
  LineFit f;
  f.slope = (sw * sxy - sx * sy) / det;
  f.intercept = (sy - f.slope * sx) / sw;
  if (f.intercept < 0) {
    f.intercept = 0;
    f.slope = sxx > 0 ? sxy / sxx : 0;
  } else if (f.slope < 0) {
    f.slope = 0;
    f.intercept = sy / sw;
  }
  f.rms_rel_error = rms_rel(x, y, f.intercept, f.slope);
  return f;
}

EfficiencyFit fit_efficiency(const std::vector<double>& d, const std::vector<double>& rate) {
  if (d.size() != rate.size() || d.empty()) {
    throw RuntimeError("fit: need at least one (dimension, rate) point");
  }
  EfficiencyFit f;
  bool distinct = false;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!(d[i] > 0) || !(rate[i] > 0)) throw RuntimeError("fit: dimensions and rates must be > 0");
    distinct = distinct || d[i] != d[0];
  }
  if (!distinct) {
    double sum = 0;
    for (double r : rate) sum += r;
    f.peak = sum / static_cast<double>(rate.size());
  } else {
    // Time per FLOP = 1/rate = a + b/d; minimising the relative error of 1/rate.
    std::vector<double> x, y;
    for (std::size_t i = 0; i < d.size(); ++i) {
      x.push_back(1.0 / d[i]);
      y.push_back(1.0 / rate[i]);
    }
    const LineFit line = fit_line_relative(x, y);
    if (line.intercept > 0) {
      f.peak = 1.0 / line.intercept;
      f.half_dim = line.slope / line.intercept;
    } else {
      // Still rising linearly at the largest size: take the best measured rate as the peak
      // and the curve through the points' relative mean.
      double best = 0;
      for (double r : rate) best = std::max(best, r);
      f.peak = best;
      f.half_dim = 0;
    }
  }
  double sum = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double fitted = f.peak * d[i] / (d[i] + f.half_dim);
    const double r = (fitted - rate[i]) / rate[i];
    sum += r * r;
  }
  f.rms_rel_error = std::sqrt(sum / static_cast<double>(d.size()));
  return f;
}

}  // namespace stratagem::scenario
