#pragma once
// `stratagem calibrate --measured runs.jsonl`: fits the fitted profile's parameters
// (scenario::FitParam: GEMM, attention and HBM efficiency scales, link bandwidth scales, the
// communication/compute slow-down) to measured runs, separately for each GPU among the runs.
//
// The residual of a run is log(predicted / measured throughput); the fit minimises their sum
// of squares by Levenberg–Marquardt over the scales' logarithms (and the slow-down itself,
// kept ≥ 0), with the Jacobian by finite differences of whole simulations. A parameter no run
// depends on (every run on one node: the inter-node link) is not determined and keeps its
// neutral value. Uncertainty: the standard errors from σ²·(JᵀJ)⁻¹ at the optimum, σ² the
// residual variance over n − p degrees of freedom. Leave-one-out error: the linearised
// prediction of each run by the fit without it, r_i / (1 − h_ii) with h the hat matrix.
#include <functional>
#include <string>
#include <vector>

#include "engine/scenario/fitted_profile.hpp"
#include "tune/validation.hpp"

namespace stratagem::tune {

struct MeasuredFitOptions {
  int threads = 0;  ///< simulations at once; 0: one per hardware thread
  int max_iterations = 30;
  /// (simulations done, expected total): expected grows if more iterations are needed.
  std::function<void(long, long)> progress;
};

/// One GpuFit per GPU name among the runs, in order of first appearance.
scenario::FittedProfile fit_measured_runs(const std::vector<MeasuredRun>& runs,
                                          const MeasuredFitOptions& options = {});

/// log(predicted / measured throughput) of one run simulated with `values` applied.
double log_residual(const MeasuredRun& run, const scenario::FitValues& values);

}  // namespace stratagem::tune
