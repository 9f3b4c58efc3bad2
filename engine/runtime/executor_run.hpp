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
#include "engine/runtime/tp_units.hpp"
#include "engine/scenario/error.hpp"

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

/// Tensor parallelism: each op of a TP chain (its compute pieces and TP collectives) → the
/// chain's first compute piece, which names its micro-batch, direction, stage and chunk, and
/// whether the op ends the chain (executor_tp.cpp). Empty without TP.
std::unordered_map<OpId, TpChainOp> index_tp_chains(const plan::StepPlan& plan, int rank);

struct Executor::Run {
  struct OpRun {
    int status = 0;  // 0 waiting, 1 in flight, 2 done
    Clock::time_point start, end;
    comm::WorkPtr work;
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
  std::unordered_map<std::int64_t, std::unique_ptr<TpUnitRun>> tp_runs;  // (mb, unit) under TP
  std::unordered_map<std::int64_t, std::int64_t> tp_live_before;        // its chain's start
  std::unordered_map<std::int64_t, OpId> tp_pending_release;  // (mb, unit) → op freeing its gather
  std::vector<std::pair<at::Tensor, std::int64_t>> sp_parts;  // SP sync: resident views
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
  /// A collective just handed to the communicator: its stream is busy until it completes.
  void issued(OpId id);
  void post_p2p(OpId id);
  void complete(OpId id, Clock::time_point when);
  bool issue_ready();

  // ---- tensor parallelism (executor_tp.cpp) -------------------------------------------------
  const plan::Compute& tp_piece_of(OpId id) const;
  /// The unit's run for `op` of a chain whose first compute piece is `c`: created by its
  /// forward's first op; switched to recomputation or backward by those chains' first ops.
  TpUnitRun& tp_run(const plan::Op& op, const plan::Compute& c);
  /// After an op of a chain: when the chain is over, hands on its output or gradients.
  void tp_after(const plan::Op& op, const plan::Compute& c, TpUnitRun& run);
  void tp_compute(const plan::Op& op, const plan::Compute& c);
  /// After the chain's last op: the unit's remaining work (it needs no communication).
  void tp_finish_chain(OpId id, TpUnitRun& run);
  /// Frees the chain's gathered parameters once the chain is over (see executor_tp.cpp).
  void tp_release(OpId id, const plan::Compute& piece);
  void start_tp_collective(OpId id);
  void complete_tp_collective(OpId id);
  bool is_sequence_parallel_sync(const plan::Collective& c) const;
  void start_sequence_parallel_sync(OpId id);
  void complete_sequence_parallel_sync(OpId id);

  // ---- compute (executor_compute.cpp) ------------------------------------------------------
  /// Frees the gathered parameters of units [u0, u1) that `op`'s memory effects release.
  void release_gathered_after(const plan::Op& op, int u0, int u1);
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
