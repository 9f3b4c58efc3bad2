#pragma once
// Arrival spread at synchronisation points. When ranks compute with a run-to-run spread, a
// collective (or a transfer) starts when the *last* member arrives, and the expected latest
// arrival lies above the latest expected one: for n identical members by σ · E[max of n
// standard normals] (0.564 σ for two, 1.03 σ for four, 3.4 σ for 1,024). Members that arrive
// early by more than a few σ do not matter, which is what the simulator needs for pipeline
// transfers, where one side usually waits for the other anyway.
#include <utility>
#include <vector>

namespace stratagem::sim {

struct Arrival {
  double mean_s = 0;       ///< expected arrival time
  double variance_s2 = 0;  ///< variance of the arrival time
};

/// Mean and variance of the latest of independent normal arrivals, by Clark's (1961) moment
/// matching applied member by member: exact for two, within a few per cent of the exact order
/// statistic for larger groups. The maximum of the means when every variance is 0.
Arrival expected_latest(const std::vector<Arrival>& arrivals);

/// The latest of `n` independent copies of `a` (the members a folded plan does not build).
Arrival expected_latest_of_copies(const Arrival& a, int n);

}  // namespace stratagem::sim
