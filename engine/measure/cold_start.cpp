#include "engine/measure/cold_start.hpp"

#include <algorithm>
#include <chrono>

#include <ATen/ATen.h>

#include "engine/measure/commbench.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/measure/stopwatch.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::measure {

ColdStart measure_cold_start(comm::Communicator& comm, scenario::CommOp op,
                             const c10::Device& device, const ColdStartOptions& o) {
  if (op == scenario::CommOp::sendrecv) {
    throw RuntimeError("measure_cold_start: sendrecv is not a collective");
  }
  const int n = comm.world_size();
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  const std::int64_t elems = std::max<std::int64_t>(o.bytes / 4 / n, 1) * n;
  auto buffer = at::ones({elems}, options);
  auto part = at::ones({elems / n}, options);
  auto gathered = at::empty({elems}, options);
  const auto a = at::randn({64, 64}, options), b = at::randn({64, 256}, options);
  auto c = at::empty({64, 256}, options);
  auto issue = [&]() -> comm::WorkPtr {
    switch (op) {
      case scenario::CommOp::reduce_scatter:
        return comm.reduce_scatter(part, buffer, {});
      case scenario::CommOp::all_gather:
        return comm.all_gather(gathered, part, {});
      case scenario::CommOp::broadcast:
        return comm.broadcast(buffer, 0, {});
      default:
        return comm.all_reduce(buffer, {}, comm::ReduceOp::sum);
    }
  };
  auto burst = [&] {
    const auto t0 = Clock::now();
    while (seconds_since(t0) < o.burst_s) at::mm_out(c, a, b);
    synchronize(c);
  };
  double sum[2] = {0, 0};
  int count[2] = {0, 0};
  comm.barrier({});
  issue()->wait();  // warm-up
  for (int round = 0; round < o.rounds; ++round) {
    for (const bool after_compute : {false, true}) {
      for (int i = 0; i < o.samples; ++i) {
        if (after_compute) burst();
        const auto t0 = Clock::now();
        issue()->wait();
        sum[after_compute] += seconds_since(t0);
        ++count[after_compute];
      }
    }
  }
  ColdStart r;
  r.back_to_back_s =
      reduce_scalar(comm, sum[0] / std::max(count[0], 1), comm::ReduceOp::max, device);
  r.after_compute_s =
      reduce_scalar(comm, sum[1] / std::max(count[1], 1), comm::ReduceOp::max, device);
  return r;
}

}  // namespace stratagem::measure
