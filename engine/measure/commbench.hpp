#pragma once
// Collective benchmarks in the manner of nccl-tests, over any Communicator (Gloo on CPUs, NCCL
// on GPUs, the in-process backend in tests): for each size, warm-up iterations, then timed
// iterations issued back to back and waited for together (sendrecv: one exchange at a time),
// then a separate correctness pass that fills every rank's input with rank-dependent small
// integers and counts the result elements that differ from the closed-form expectation.
//
// Sizes follow nccl-tests: `bytes` is the buffer of all_reduce and broadcast, the full n-rank
// buffer of reduce_scatter (input) and all_gather (output), and each rank's message for
// sendrecv (rank r sends to r+1 and receives from r−1). time is the mean per op, the maximum
// over ranks; algbw = bytes / time; busbw = algbw · scenario::bus_factor(op, n); #wrong is summed
// over ranks. The values are integers ≤ 7n, so the check is exact in every dtype for
// n ≤ 36 (bf16 holds integers up to 256 exactly).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "engine/comm/communicator.hpp"
#include "engine/scenario/comm_op.hpp"

namespace stratagem::measure {

struct CommBenchOptions {
  scenario::CommOp op = scenario::CommOp::all_reduce;
  at::ScalarType dtype = at::kFloat;
  std::vector<std::int64_t> sizes;  ///< bytes, nccl-tests' size (scenario::size_sweep)
  int warmup = 5;
  int iters = 20;
  /// > 0: pick the iterations per size so that each size's timed loop takes about this long
  /// (at least 2, at most `iters`), from the slowest rank's warm-up time (calibration).
  double budget_s = 0;
  bool check = true;
  int root = 0;  ///< broadcast root (global rank)
  c10::Device device = c10::Device(c10::kCPU);
  /// Fault injection for tests: this rank's contribution to the checked op is off by one in
  /// its first element (so the others receive a wrong result). -1: none.
  int fault_rank = -1;
};

struct CommBenchRow {
  std::int64_t bytes = 0;
  std::int64_t count = 0;  ///< elements (of the full buffer for reduce_scatter/all_gather)
  int iters = 0;
  double time_s = 0;        ///< mean per op, max over ranks
  double algbw = 0;         ///< bytes/s
  double busbw = 0;         ///< bytes/s
  std::int64_t wrong = -1;  ///< mismatching elements summed over ranks; -1: not checked
};

/// "float", "double", "bf16", "half" (nccl-tests' -d names; also fp32, fp64, bfloat16, fp16)
/// → dtype; SpecError naming `path`.
at::ScalarType parse_bench_dtype(const std::string& name, const std::string& path);
/// nccl-tests' type column: "float", "double", "bfloat16", "half".
std::string bench_dtype_name(at::ScalarType t);

/// Runs the benchmark on every rank of `comm` (all must call it with the same options);
/// `on_row` is called on every rank as each size completes. Throws RuntimeError on failures.
std::vector<CommBenchRow> run_commbench(
    comm::Communicator& comm, const CommBenchOptions& options,
    const std::function<void(const CommBenchRow&)>& on_row = {});

/// The nccl-tests header lines (starting with '#') for one op's table.
std::string commbench_header(const CommBenchOptions& options, int world_size);
/// One row as nccl-tests prints it.
std::string commbench_row_text(const CommBenchRow& row, const CommBenchOptions& options);
/// The footer: "# Out of bounds values : 0 OK" and "# Avg bus bandwidth    : 1.23".
std::string commbench_footer(const std::vector<CommBenchRow>& rows);

/// One op's results for --json: {"op", "dtype", "bus_factor", "rows": [{bytes, count, iters,
/// time_us, algbw_GBps, busbw_GBps, wrong}], "avg_busbw_GBps", "wrong"}.
nlohmann::json commbench_json(const CommBenchOptions& options, int world_size,
                              const std::vector<CommBenchRow>& rows);

/// Reduces one number over all ranks (sum or max) through `comm`, on its device.
double reduce_scalar(comm::Communicator& comm, double value, comm::ReduceOp op,
                     const c10::Device& device);

}  // namespace stratagem::measure
