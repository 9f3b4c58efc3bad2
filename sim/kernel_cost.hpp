#pragma once
// What one kernel of a stack's kernel list (engine/workload/kernels.hpp) costs on a GPU: the
// kernel as a compute op of its own on the roofline compute model (compute_model.hpp), so a
// kernel and the plan's ops are costed by the same rules (GEMM efficiency for its smallest
// dimension times its wave utilization, plus its operands' traffic with a formula curve;
// attention at its curve, memory-bound bytes at the achieved HBM bandwidth, one launch). A
// kernel whose time is mostly its launch is launch-bound.
#include "engine/scenario/strategy.hpp"
#include "engine/workload/kernel_graph.hpp"
#include "sim/compute_model.hpp"

namespace stratagem::sim {

enum class KernelBound { compute, memory, launch };
const char* to_string(KernelBound b);

struct KernelCost {
  double seconds = 0;
  KernelBound bound = KernelBound::compute;
};

/// `attention_kernel`: which fused kernel's curves cost an attention kernel.
KernelCost kernel_cost(const workload::Kernel& k, const RooflineModel& roofline,
                       scenario::AttentionKernel attention_kernel);

}  // namespace stratagem::sim
