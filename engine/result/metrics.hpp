#pragma once
// Step metrics derived from a RunResult's spans and scenario, the same way for every
// executor (definitions in docs/simulate.md, "Metrics"). Folded ranks count as copies of the
// rank they are the same as, so a folded and an unfolded run of one plan agree.
#include "engine/result/result.hpp"

namespace stratagem::result {

/// `model_flops_per_step` is the plan's (6·N·tokens + attention, no recomputation).
Metrics compute_metrics(const RunResult& r, double model_flops_per_step);

/// Length of the union of [start, end) intervals (sorted or not).
double union_length(std::vector<std::pair<double, double>> intervals);

/// The median (mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> v);
/// Sample standard deviation (n − 1); 0 for fewer than two values.
double sample_stddev(const std::vector<double>& v);
/// Sample standard deviation over the mean; 0 for fewer than two values or a zero mean.
double coefficient_of_variation(const std::vector<double>& v);

}  // namespace stratagem::result
