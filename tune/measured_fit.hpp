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
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "engine/scenario/fitted_profile.hpp"
#include "tune/validation.hpp"

namespace stratagem::tune {

struct MeasuredFitOptions {
  int threads = 0;  ///< simulations at once; 0: one per hardware thread
  int max_iterations = 30;
  /// The parameters to fit; empty: all of them. The others keep their neutral values.
  std::vector<scenario::FitParam> parameters;
  /// Whether `parameters` lets `p` be fitted.
  bool fits(scenario::FitParam p) const {
    return parameters.empty() ||
           std::find(parameters.begin(), parameters.end(), p) != parameters.end();
  }
  /// Fit GPUs of one chip together: the same SM count and tensor-core peaks (A100 SXM 40 GB
  /// and 80 GB: one GA100 at one clock, different HBM), each GPU then reported with the
  /// group's values and run count. Off: one fit per GPU name.
  bool per_chip = false;
  /// A parameter counts as determined only when some run's log throughput moves by at least
  /// this times a change of its log (1: as much as a whole-step multiplier), and the runs' rms
  /// by at least 1e-4; otherwise it keeps its neutral value. 0.25 keeps an fp8 run's few
  /// 16-bit GEMMs (the LM head) from fitting the 16-bit GEMM maximum.
  double min_sensitivity = 0;
  /// (simulations done, expected total): expected grows if more iterations are needed.
  std::function<void(long, long)> progress;
};

/// One GpuFit per GPU name among the runs, in order of first appearance.
scenario::FittedProfile fit_measured_runs(const std::vector<MeasuredRun>& runs,
                                          const MeasuredFitOptions& options = {});

/// The key `per_chip` groups GPUs by: the SM count and tensor-core peaks, or the name when the
/// GPU states no SM count.
std::string chip_of(const scenario::GpuSpec& gpu);

/// log(predicted / measured throughput) of one run simulated with `values` applied.
double log_residual(const MeasuredRun& run, const scenario::FitValues& values);

}  // namespace stratagem::tune
