#include "sim/kernel_cost.hpp"

#include <algorithm>

namespace stratagem::sim {

const char* to_string(KernelBound b) {
  switch (b) {
    case KernelBound::memory:
      return "memory";
    case KernelBound::launch:
      return "launch";
    case KernelBound::compute:
      break;
  }
  return "compute";
}

KernelCost kernel_cost(const workload::Kernel& k, const scenario::GpuSpec& gpu,
                       scenario::AttentionKernel attention_kernel) {
  const double hbm = gpu.hbm_bandwidth * gpu.hbm_efficiency;
  double compute_s = 0, memory_s = 0;
  switch (k.kind) {
    case workload::KernelKind::gemm: {
      const scenario::EfficiencyCurve& curve = gpu.efficiency(k.dtype);
      const double smallest = std::min({k.m, k.n, k.k});
      const double eff = std::min(1.0, curve.at(smallest) * gpu.gemm_scale);
      const double peak = gpu.peak(k.dtype) * eff;
      compute_s = peak > 0 ? k.flops / peak : 0.0;
      // A formula curve is the compute side only; a measured one includes the traffic.
      if (curve.table.empty() && hbm > 0) memory_s = k.bytes / hbm;
      break;
    }
    case workload::KernelKind::attention: {
      const auto curve = gpu.attention_kernel_efficiency(scenario::to_string(attention_kernel),
                                                         k.head_dim, k.causal, k.seq);
      const double eff = curve ? *curve : gpu.attention_efficiency(k.backward);
      const double peak = gpu.peak(k.dtype) * std::min(1.0, eff * gpu.attention_scale);
      compute_s = peak > 0 ? k.flops / peak : 0.0;
      break;
    }
    case workload::KernelKind::memory:
      memory_s = hbm > 0 ? k.bytes / hbm : 0.0;
      break;
  }
  KernelCost c;
  c.seconds = compute_s + memory_s + gpu.kernel_launch_s;
  const double top = std::max({compute_s, memory_s, gpu.kernel_launch_s});
  c.bound = top == gpu.kernel_launch_s ? KernelBound::launch
            : top == compute_s         ? KernelBound::compute
                                       : KernelBound::memory;
  return c;
}

}  // namespace stratagem::sim
