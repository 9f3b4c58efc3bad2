#include "engine/workload/weights.hpp"

#include "engine/scenario/tensor_shapes.hpp"

namespace stratagem::workload {

double gather_bytes(const scenario::StrategySpec& st, const Unit& u) {
  const double c = scenario::compute_param_bytes(st.precision);
  if (st.fp8_all_gather) return u.linear_params + c * (u.gather_params - u.linear_params);
  return c * u.gather_params;
}

double gathered_bytes(const scenario::StrategySpec& st, const Unit& u) {
  const bool casts = st.precision == scenario::Precision::fp8 && !st.fp8_all_gather;
  return gather_bytes(st, u) + (casts ? kFp8CopyBytesPerParam * u.linear_params : 0.0);
}

double fp8_resident_bytes(const scenario::StrategySpec& st, const std::vector<Unit>& units,
                          const std::vector<std::pair<int, int>>& chunks) {
  if (st.precision != scenario::Precision::fp8) return 0;
  const bool copies = !scenario::shards_parameters(st.sharding);
  double bytes = 0;
  for (const auto& [b, e] : chunks) {
    for (int u = b; u < e; ++u) {
      if (units[u].linear_params <= 0) continue;
      if (copies) bytes += kFp8CopyBytesPerParam * units[u].linear_params;
      bytes += kFp8LinearsPerBlock * kFp8TensorsPerLinear * (kFp8AmaxHistory + 2) * 4.0;
    }
  }
  return bytes;
}

}  // namespace stratagem::workload
