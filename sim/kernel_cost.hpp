#pragma once
// What one kernel of a stack's kernel list (engine/workload/kernels.hpp) costs on a GPU, with
// the same parts the roofline compute model uses for a whole op: a GEMM at the GPU's GEMM
// efficiency for its smallest dimension (plus its operands' HBM traffic with a formula curve),
// a fused attention kernel at its published curve, a memory-bound kernel at the achieved HBM
// bandwidth; every kernel pays the launch cost, and a kernel shorter than that is
// launch-bound.
#include "engine/scenario/cluster.hpp"
#include "engine/scenario/strategy.hpp"
#include "engine/workload/kernel_graph.hpp"

namespace stratagem::sim {

enum class KernelBound { compute, memory, launch };
const char* to_string(KernelBound b);

struct KernelCost {
  double seconds = 0;
  KernelBound bound = KernelBound::compute;
};

/// `attention_kernel`: which fused kernel's curves cost an attention kernel.
KernelCost kernel_cost(const workload::Kernel& k, const scenario::GpuSpec& gpu,
                       scenario::AttentionKernel attention_kernel);

}  // namespace stratagem::sim
