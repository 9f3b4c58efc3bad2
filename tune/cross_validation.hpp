#pragma once
// Leave-one-source-out cross-validation of a fit to measured runs (issue #40 item 3): for each
// table (MeasuredRun::source), fit the parameters on every other table, predict the held-out
// table's runs with that fit (a GPU the other tables did not determine keeps its preset
// values) and report the held-out error and pairwise order beside the unfitted prediction's.
// An error a user can expect on a source the fit has not seen, not the fit's own residual.
#include <string>
#include <vector>

#include "tune/measured_fit.hpp"
#include "tune/ranking.hpp"
#include "tune/validation.hpp"

namespace stratagem::tune {

struct SourceFold {
  std::string source;
  int runs = 0;
  /// GPUs of the held-out runs whose fitted values came from the other tables.
  std::vector<std::string> fitted_gpus;
  ErrorSummary unfitted, held_out;  ///< presets as shipped; fitted without this table
  PairOrder unfitted_order, held_out_order;
  std::vector<RunComparison> held_out_rows;  ///< one per run of the table, in file order
  std::vector<RunComparison> unfitted_rows;  ///< the same runs with the presets as shipped
  scenario::FittedProfile fit;               ///< the fit to the other tables
};

struct CrossValidation {
  std::vector<SourceFold> folds;  ///< in order of the sources' first appearance
};

/// Needs runs from at least two sources (SpecError("--measured") otherwise).
CrossValidation leave_one_source_out(const std::vector<MeasuredRun>& runs,
                                     const MeasuredFitOptions& options = {});

/// The runs' predictions with a fitted profile's values for their GPU applied (neutral where
/// the profile has no fit for it), simulated on `threads` threads (0: one per hardware thread).
std::vector<RunComparison> predict_with_fit(const std::vector<MeasuredRun>& runs,
                                            const scenario::FittedProfile& fit, int threads = 0);

}  // namespace stratagem::tune
