#pragma once
// The NCCL backend for CUDA tensors: raw NCCL communicators (ids shared through the job's
// Store), one CUDA stream for collectives and one per point-to-point direction. Built when CUDA
// and NCCL are found (STRATAGEM_HAVE_NCCL); it runs only where a GPU is.
//
// Ordering with LibTorch: each op first waits (on the GPU) for the work already queued on the
// legacy default stream, where LibTorch computes unless told otherwise; Work::wait() then
// blocks the host until the op finished, so its results are safe on any stream. Collectives are
// enqueued in issue order by a worker thread that also creates subgroup communicators on first
// use (the lowest member makes the id), so issuing never blocks the caller. NCCL pairs send
// and recv by order between two ranks; tags only label errors. No CUDA headers here.
#include <chrono>
#include <memory>
#include <string>

#include "engine/comm/communicator.hpp"

namespace stratagem::comm {

class Store;

/// Uses GPU local_rank % device count. Creates the world communicator now (blocking until all
/// ranks join).
std::unique_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Store> store, int rank,
                                                     int world_size, int local_rank,
                                                     std::chrono::milliseconds timeout,
                                                     const std::string& prefix = "nccl/");

}  // namespace stratagem::comm
