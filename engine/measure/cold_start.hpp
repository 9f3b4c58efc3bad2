#pragma once
// A collective's extra time when its rank issues it after computing, against one in a
// back-to-back stream (how `calibrate` sweeps collectives, commbench.hpp). In training most
// collectives come right after compute: a tensor-parallel chain issues every one of them so,
// data-parallel buckets as backward produces them. Where the backend's progress runs on host
// threads (Gloo), those threads sleep while the rank computes and are woken by the collective;
// on a busy or virtualised host that wake-up is heavy-tailed (on the 2-vCPU development VM a
// 512 KiB all-gather: median ~0.4 ms back to back, one call in ten ~4-5 ms after compute,
// bench/gloo_after_compute.py). The simulator adds the measured extra to a collective that
// starts with no communication in flight on one of its ranks (sim::CostModels::cold_start_s).
#include <cstdint>

#include <c10/core/Device.h>

#include "engine/comm/communicator.hpp"
#include "engine/scenario/comm_op.hpp"

namespace stratagem::measure {

struct ColdStartOptions {
  std::int64_t bytes = 256 << 10;  ///< nccl-tests' size of the collective
  double burst_s = 2e-3;           ///< compute before each call, on every rank
  int samples = 60;                ///< calls per pattern and round
  int rounds = 2;                  ///< back to back and after compute alternate
};

struct ColdStart {
  double back_to_back_s = 0;   ///< mean per call, the slowest rank's
  double after_compute_s = 0;  ///< mean per call right after a compute burst
  /// after_compute_s − back_to_back_s, at least 0.
  double extra_s() const { return after_compute_s > back_to_back_s ? after_compute_s - back_to_back_s : 0; }
};

/// Every rank of `comm` calls it together; every rank gets the same result. The compute is a
/// loop of small matmuls (a few microseconds each, so a burst ends on time on every rank); the
/// calls run without a barrier between them, as a training step's do. `op` is a collective
/// (not sendrecv).
ColdStart measure_cold_start(comm::Communicator& comm, scenario::CommOp op,
                             const c10::Device& device, const ColdStartOptions& options = {});

}  // namespace stratagem::measure
