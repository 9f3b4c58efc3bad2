#pragma once
// Compute on one process against compute on every process at once. CPU worker processes share
// the host's cores, caches and memory bandwidth (and, on a VM, whatever the hypervisor gives
// the vCPUs, or SMT siblings): on the 2-vCPU development VM a GPT block runs 1.02-1.15x slower
// while the other process computes too (bench/cpu_contention.py), more where processes
// outnumber cores. The profile's compute times are measured with
// every process computing; a pipeline's ranks take turns, so the simulator scales each compute
// op by how many ranks of its node compute at that moment (sim::CostModels::contention_rate).
#include <functional>

#include <c10/core/Device.h>

#include "engine/comm/communicator.hpp"

namespace stratagem::measure {

struct ComputeContention {
  double alone_s = 0;     ///< mean time of one work item, the other processes idle
  double together_s = 0;  ///< the same, every process computing at once
  int processes = 1;
  /// The extra time per other computing process: (together / alone − 1) / (processes − 1),
  /// at least 0 (the mean over ranks of each rank's own ratio).
  double per_peer = 0;
};

/// Every rank of `comm` calls it together; every rank gets the same result. Each rank in turn
/// runs `work` for `seconds` while the others wait in a barrier, then all run it for `seconds`
/// at once; three such rounds, each time the shortest of its three windows (outside load only
/// lengthens a window). `work` must finish its device work before returning.
ComputeContention measure_compute_contention(comm::Communicator& comm,
                                             const std::function<void()>& work, double seconds,
                                             const c10::Device& device);

/// A block-like CPU work item when no scenario is given: a 512-token, 256-wide MLP forward
/// (two matmuls through 1024, GELU, residual add), in fp32.
std::function<void()> mlp_workload(const c10::Device& device);

}  // namespace stratagem::measure
