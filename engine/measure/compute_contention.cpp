#include "engine/measure/compute_contention.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "engine/measure/commbench.hpp"
#include "engine/measure/device_bench.hpp"

namespace stratagem::measure {

namespace {

constexpr int kRounds = 3;

// Mean time per call of `work` over `seconds` (after one warm-up call): measure_rate's loop.
double time_per_call(const std::function<void()>& work, double seconds) {
  return 1.0 / measure_rate(
                   1.0,
                   [&] {
                     work();
                     return at::Tensor();
                   },
                   seconds, 1);
}

}  // namespace

ComputeContention measure_compute_contention(comm::Communicator& comm,
                                             const std::function<void()>& work, double seconds,
                                             const c10::Device& device) {
  const int n = comm.world_size();
  const int rank = comm.rank();
  // Load from outside the job (other programs, a CI's other tests) only ever lengthens a
  // window: each time is the shortest of kRounds windows, alone and together interleaved so
  // a burst of outside load falls on both alike.
  double alone = 0, together = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int r = 0; r < n; ++r) {
      comm.barrier({});
      if (rank == r) {
        const double t = time_per_call(work, seconds);
        alone = round == 0 ? t : std::min(alone, t);
      }
    }
    comm.barrier({});
    const double t = time_per_call(work, seconds);
    together = round == 0 ? t : std::min(together, t);
  }
  comm.barrier({});
  ComputeContention c;
  c.processes = n;
  c.alone_s = reduce_scalar(comm, alone, comm::ReduceOp::sum, device) / n;
  c.together_s = reduce_scalar(comm, together, comm::ReduceOp::sum, device) / n;
  const double ratio =
      reduce_scalar(comm, together / std::max(alone, 1e-12), comm::ReduceOp::sum, device) / n;
  c.per_peer = n > 1 ? std::max(0.0, (ratio - 1) / (n - 1)) : 0.0;
  return c;
}

std::function<void()> mlp_workload(const c10::Device& device) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  const auto x = at::randn({512, 256}, options);
  const auto w1 = at::randn({256, 1024}, options), w2 = at::randn({1024, 256}, options);
  return [x, w1, w2] {
    const auto y = at::add(x, at::mm(at::gelu(at::mm(x, w1)), w2));
    synchronize(y);
  };
}

}  // namespace stratagem::measure
