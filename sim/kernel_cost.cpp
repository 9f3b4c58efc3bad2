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

KernelCost kernel_cost(const workload::Kernel& k, const RooflineModel& roofline,
                       scenario::AttentionKernel attention_kernel) {
  plan::Compute c;
  c.dtype = k.dtype;
  c.kernels = 1;
  switch (k.kind) {
    case workload::KernelKind::gemm:
      c.flops = k.flops;
      c.gemm_dim = std::min({k.m, k.n, k.k});
      c.gemms = workload::gemm_mix({k});
      c.gemm_bytes = k.bytes;
      break;
    case workload::KernelKind::attention:
      c.attention_flops = k.flops;
      c.attention_seq = k.seq;
      c.head_dim = k.head_dim;
      c.causal = k.causal;
      c.attention_kernel = attention_kernel;
      c.phase = k.backward ? plan::Phase::backward : plan::Phase::forward;
      break;
    case workload::KernelKind::memory:
      c.bytes = k.bytes;
      break;
  }
  KernelCost out;
  out.seconds = roofline.duration(c);
  // The same op without its FLOPs: its traffic and launch only.
  plan::Compute traffic = c;
  traffic.flops = traffic.attention_flops = 0;
  const double launch = roofline.gpu().kernel_launch_s;
  const double memory = roofline.duration(traffic) - launch;
  const double compute = out.seconds - memory - launch;
  const double top = std::max({compute, memory, launch});
  out.bound = top == launch    ? KernelBound::launch
              : top == compute ? KernelBound::compute
                               : KernelBound::memory;
  return out;
}

}  // namespace stratagem::sim
