#pragma once
// The communication operations that benchmarks and hardware profiles measure, with
// nccl-tests' conventions for sizes and bus bandwidth (doc/PERFORMANCE.md in nccl-tests):
//   algbw = size / time
//   busbw = algbw · bus_factor(op, n)
//   all_reduce 2(n−1)/n; reduce_scatter, all_gather (n−1)/n with size = the full buffer
//   (n·k elements); broadcast 1; sendrecv 1 (each rank sends `size` to the next one).
// No LibTorch here: the simulator and the profile loader use it too.
#include <cstdint>
#include <string>
#include <vector>

namespace stratagem::scenario {

enum class CommOp : std::uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, sendrecv };
inline constexpr int kCommOpCount = 5;
/// The collectives (every CommOp but sendrecv), in enum order.
inline constexpr CommOp kCollectiveOps[] = {CommOp::all_reduce, CommOp::reduce_scatter,
                                            CommOp::all_gather, CommOp::broadcast};

const char* to_string(CommOp op);
/// "all_reduce", "allreduce", "all-reduce" (and the same for the others, "p2p" for sendrecv);
/// SpecError naming `path` otherwise.
CommOp parse_comm_op(const std::string& name, const std::string& path);

/// nccl-tests' bus-bandwidth factor for `n` ranks (1 when n == 1 for every op, as nccl-tests).
double bus_factor(CommOp op, int n);

/// "8", "4K", "64M", "1G" (binary multiples: K = 1024) → bytes; SpecError naming `path`.
std::int64_t parse_size(const std::string& text, const std::string& path);
/// 1024 → "1K", 65536 → "64K", 3000 → "3000": the largest exact binary suffix.
std::string format_size(std::int64_t bytes);

/// Message sizes from `min_bytes` to `max_bytes` (both included when reached), multiplying by
/// `factor` (> 1) — nccl-tests' -b/-e/-f. SpecError naming the flag when the range is empty.
std::vector<std::int64_t> size_sweep(std::int64_t min_bytes, std::int64_t max_bytes, double factor);

/// Elements per rank-buffer for a benchmark size, as nccl-tests counts them: `size` bytes of
/// `element_bytes`, rounded down to a multiple of n for reduce_scatter and all_gather (whose
/// size is the full n-rank buffer), and at least one element (n for those two).
std::int64_t element_count(CommOp op, std::int64_t size_bytes, int element_bytes, int n);

}  // namespace stratagem::scenario
