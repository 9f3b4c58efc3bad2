#pragma once
// Least-squares fits used by calibration, kept free of LibTorch so they are unit-tested with
// exact data. Measurements span decades (8 B to 64 MiB messages), so the fits minimise the
// *relative* residuals: a 10 µs point matters as much as a 100 ms one.
#include <vector>

namespace stratagem::scenario {

/// y ≈ intercept + slope · x.
struct LineFit {
  double intercept = 0;
  double slope = 0;
  double rms_rel_error = 0;  ///< sqrt(mean(((fit − y) / y)²)) over the points
};

/// Weighted least squares minimising Σ((intercept + slope·x − y) / y)². Needs ≥ 2 points with
/// distinct x and y > 0 (RuntimeError otherwise). A negative intercept (the model cannot
/// explain the smallest points) is clamped to 0 and the slope refitted through the origin;
/// a negative slope (sizes too small to see bandwidth) is clamped to 0 likewise.
LineFit fit_line_relative(const std::vector<double>& x, const std::vector<double>& y);

/// A matrix multiply's rate as a function of its smallest dimension d:
/// rate(d) = peak · d / (d + half_dim), the simulator's efficiency curve with max 1.
struct EfficiencyFit {
  double peak = 0;  ///< FLOP/s approached by large GEMMs
  double half_dim = 0;
  double rms_rel_error = 0;
};

/// Fits rate(d) through 1/rate = 1/peak + (half_dim/peak) · (1/d), a line in 1/d, with relative
/// weighting. One point (or all d equal) gives half_dim 0 and the mean rate as the peak.
EfficiencyFit fit_efficiency(const std::vector<double>& smallest_dim,
                             const std::vector<double>& flops_per_s);

}  // namespace stratagem::scenario
