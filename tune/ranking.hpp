#pragma once
// Whether the simulator orders strategies as they measure: among measured runs of the same
// setting (model, GPU, GPU count, sequence length), every pair whose measured throughput differs
// by more than `min_gap` (5 %) is a decision a user would make from the simulator; it is ordered
// right when the predicted throughputs order the pair the same way. Kendall's tau (tau-a) over
// all pairs of a setting, and pooled over the settings, says the same with every pair counted.
// Issue #40: "orders measured strategy pairs right" is a metric of its own, beside the error.
#include <string>
#include <vector>

#include "tune/validation.hpp"

namespace stratagem::tune {

struct PairOrder {
  int pairs = 0;          ///< pairs whose measured throughput differs by more than the gap
  int ordered_right = 0;  ///< of those, ordered the same way by the prediction
  int all_pairs = 0;      ///< every pair (Kendall's tau counts them all)
  int concordant = 0, discordant = 0;  ///< over all_pairs (ties in either are neither)
  /// ordered_right / pairs; 0 when there are none.
  double share() const;
  /// (concordant − discordant) / all_pairs; 0 when there are none.
  double kendall_tau() const;
};

struct SettingOrder {
  std::string setting;  ///< "h100-80gb x64, s8192, 80 layers x 8192"
  int runs = 0;
  PairOrder order;
};

/// The runs grouped by setting (`runs[i]` and `rows[i]` the same run), each setting with at
/// least two runs; `overall` pools their pairs.
struct Ranking {
  std::vector<SettingOrder> settings;
  PairOrder overall;
};
Ranking rank_pairs(const std::vector<MeasuredRun>& runs, const std::vector<RunComparison>& rows,
                   double min_gap = 0.05);

}  // namespace stratagem::tune
