#pragma once
// The GEMMs behind a compute op's FLOPs, by shape: a unit's forward or backward GEMMs as its
// stack's kernel list (kernels.hpp) has them, with the FLOPs each shape does. The cost model
// (sim/gemm_cost.hpp) runs every shape at its own efficiency (its smallest dimension on the
// GPU's curve, its waves of output tiles over the GPU's SMs), so an op's GEMM time is
//   Σ_i flops_i / (peak · efficiency_i)
// scaled to the op's FLOPs: a piece of a unit (a TP chain's segment) keeps its unit's mix
// and pays its FLOP share of the unit's GEMM time.
#include <memory>
#include <vector>

#include "engine/workload/kernel_graph.hpp"

namespace stratagem::workload {

struct GemmShape {
  double m = 0, n = 0, k = 0;  ///< an m×k by k×n product
  double flops = 0;            ///< what GEMMs of this shape do in the unit (2·m·n·k each)
  /// Counted in the op's `flops_16bit` (the LM head under fp8), not in its `flops`.
  bool wide = false;
};

using GemmMix = std::vector<GemmShape>;
using GemmMixPtr = std::shared_ptr<const GemmMix>;

/// The GEMM kernels of `kernels`, one entry per distinct shape; nullptr when there are none.
GemmMixPtr gemm_mix(const std::vector<Kernel>& kernels, bool wide = false);

/// The kernels of `kernels` whose names are in `names`, as gemm_mix does.
GemmMixPtr gemm_mix(const std::vector<Kernel>& kernels, const std::vector<std::string>& names);

/// A mix of the given shapes (each listed once with its FLOPs).
GemmMixPtr gemm_mix(GemmMix shapes);

/// `count` copies of each mix in `parts`, one entry per distinct shape (and wideness).
GemmMixPtr merge(const std::vector<std::pair<GemmMixPtr, int>>& parts);

}  // namespace stratagem::workload
