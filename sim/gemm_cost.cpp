#include "sim/gemm_cost.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace stratagem::sim {

double wave_utilization(double m, double n, double k, int sms) {
  if (sms <= 0 || m <= 0 || n <= 0) return 1.0;
  constexpr std::array<std::array<double, 2>, 3> kTiles{{{256, 128}, {128, 256}, {128, 128}}};
  const double slots = sms;
  double best = 0;
  for (const auto& [tm, tn] : kTiles) {
    const double tiles = std::ceil(m / tm) * std::ceil(n / tn);
    // Too few tiles for one wave: split K into as many parts as fill the SMs (and K allows).
    const double splits =
        tiles >= slots
            ? 1.0
            : std::max(1.0, std::min(std::floor(slots / tiles), std::floor(k / kMinSplitK)));
    const double blocks = tiles * splits;
    const double waves = std::ceil(blocks / slots);
    best = std::max(best, blocks / (waves * slots));
  }
  return best;
}

}  // namespace stratagem::sim
