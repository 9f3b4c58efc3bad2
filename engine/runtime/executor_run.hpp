#pragma once
// Internal to the executor (executor.cpp, executor_compute.cpp): the state of one step's
// execution on one rank. Not part of the runtime's interface.
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "engine/runtime/executor.hpp"
#include "engine/runtime/executor_memory.hpp"
#include "engine/runtime/executor_watcher.hpp"
#include "engine/spec/error.hpp"

namespace stratagem::runtime {

using plan::OpId;
using Clock = std::chrono::steady_clock;

/// The key of unit `unit`'s work on micro-batch `microbatch`.
inline std::int64_t unit_key(int microbatch, int unit) {
  return (static_cast<std::int64_t>(microbatch) << 32) | static_cast<std::uint32_t>(unit);
}

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Executor::Run {
  struct OpRun {
    int status = 0;  // 0 waiting, 1 in flight, 2 done
    Clock::time_point start, end;
    WorkPtr work;
    std::vector<at::Tensor> keep;  // tensors the communicator works on
    int segment = -1;
  };

  Executor& ex;
  const plan::StepPlan& plan;
  const RankLayout& layout;
  ModelState& state;
  const GptUnits& units;
  std::int64_t step;
  int dp_index;
  Clock::time_point t0;
  std::unordered_map<OpId, OpRun> ops;
  std::array<std::size_t, plan::kStreamCount> head{};
  std::array<OpId, plan::kStreamCount> busy{};
  std::vector<OpId> collectives;  // this rank's, in id order
  std::size_t next_collective = 0;
  std::vector<OpId> p2p_waiting;
  std::set<std::int64_t> recomputed;  // (mb, unit) with a recompute op
  std::set<OpId> has_followup;        // reduce-scatters whose shard an all-reduce continues
  std::map<int, at::Tensor> batches;  // micro-batch → tokens [b, s + 1]
  std::unordered_map<std::int64_t, UnitActivation> acts;
  std::unordered_map<std::int64_t, double> act_bytes;
  double activation_bytes = 0;
  std::unordered_map<std::int64_t, at::Tensor> local_hidden;  // input of (mb, unit)
  std::unordered_map<std::int64_t, at::Tensor> local_grad;    // grad of (mb, unit)'s output
  std::unordered_map<OpId, at::Tensor> produced;  // compute op → tensor its send carries
  std::unordered_map<OpId, at::Tensor> received;  // recv op → delivered buffer
  std::map<int, at::Tensor> pending_shard;        // segment → shard awaiting its all-reduce
  double inflight_bucket_bytes = 0;
  std::vector<result::Span> spans;
  MemoryTimeline memory;
  AllocationMeter meter;
  WorkWatcher watcher;
  StepOutcome out;

  Run(Executor& e, std::int64_t step_index);
  /// Runs every op of the rank once (the step), returning when all are done.
  void execute();

  // ---- ordering and recording (executor.cpp) ----------------------------------------------
  double now_s() const { return seconds_between(t0, Clock::now()); }
  std::array<double, plan::kTensorClassCount> class_bytes() const;
  void sample_memory() { memory.record(now_s(), class_bytes()); }
  bool deps_done(const plan::Op& op) const;
  bool heads(const plan::Op& op) const;  ///< first not-yet-started op of its stream
  void begin(OpId id);
  void finish(OpId id, Clock::time_point end);
  void record_span(OpId id);
  [[noreturn]] void stalled();

  // ---- communication (executor.cpp) --------------------------------------------------------
  int segment_of(const plan::Collective& c) const;
  /// The plan's gather of units [u0, u1) also brings the word table the tied head borrows
  /// (plan::Unit::gather_params): the head of a one-stage tied model under ZeRO-3/FULL_SHARD.
  bool gathers_table(int u0, int u1) const;
  void start_collective(OpId id);
  void post_p2p(OpId id);
  void complete(OpId id, Clock::time_point when);
  bool issue_ready();

  // ---- compute (executor_compute.cpp) ------------------------------------------------------
  void run_compute(OpId id);
  void forward(const plan::Op& op, const plan::Compute& c);
  void recompute(const plan::Op& op, const plan::Compute& c);
  void backward(const plan::Op& op, const plan::Compute& c);
  void optimizer();
  const at::Tensor& batch(int mb);  ///< tokens [b, s + 1] of micro-batch `mb`
  /// The tensor a recv this op depends on delivered (undefined if it depends on none).
  at::Tensor take_received(const plan::Op& op, bool gradient);
  std::pair<int, int> chunk_range(const plan::Compute& c) const;
  /// The head's view of the word table when it borrows unit 0's (tied, one stage).
  at::Tensor borrowed_table(int unit);

  template <typename Map>
  at::Tensor take(Map& map, std::int64_t k, const plan::Op& op, const char* what) {
    auto it = map.find(k);
    if (it == map.end()) {
      throw RuntimeError("rank " + std::to_string(ex.rank_) + ": " + describe_op(plan, op.id) +
                         " has no " + what + " (plan order)");
    }
    at::Tensor t = std::move(it->second);
    map.erase(it);
    return t;
  }
};

}  // namespace stratagem::runtime
