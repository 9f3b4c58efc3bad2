#pragma once
// The transient part of a rank's peak memory: activations, gathered parameters (ZeRO-3/FSDP)
// and gradient buckets staged for reduce-scatter (ZeRO-2+/FSDP), at the moment of the step
// when their sum is largest. Found by walking the stage's own schedule (workload::schedule_order),
// so the micro-batches in flight are exactly those of the schedule the plan runs.
//
// The timeline walked is the one of the memory contract (docs/architecture.md) as the plan
// builder (engine/plan/builder.cpp) emits it:
//  * a forward of (chunk, micro-batch) is one op for the chunk, or one op per unit when
//    parameters are sharded; each allocates its units' activations at its end;
//  * a backward is one op for the chunk, or one per unit (in reverse) when parameters are
//    sharded, recomputation is on, or gradients are sharded into more than one bucket; a
//    recompute op before a unit's backward allocates its rebuilt bytes at its start; the
//    backward frees them and the activations at its end and, gradients sharded, stages the
//    unsharded gradients at its end;
//  * buckets (gradients sharded): one per unit when parameters are sharded, else units in
//    backward order filled up to bucket_mb like PyTorch DDP; a bucket's reduce-scatter starts
//    when its last unit's backward ends and frees the whole bucket;
//  * gathers (parameters sharded): every per-unit forward and backward needs its unit
//    gathered; gathers run in that order on their own stream and allocate at their start.
//    A tied LM head on one stage gathers the word table with its own parameters
//    (plan::Unit::gather_params).
//    Resharding after forward (ZeRO-3, FULL_SHARD, HYBRID_SHARD), the forward frees its
//    gather at its end and the backward gathers again; otherwise (SHARD_GRAD_OP) the forward's
//    gather is kept and the same micro-batch's backward frees it.
// Where the contract leaves timing open (collectives run on their own streams):
//  * gather g starts once the op that used gather g−prefetch−1 has ended (the builder's
//    dependency). While a unit computes, its own gather and the next `prefetch` are live:
//    exact for prefetch ≤ 1 at any speed (gather g+1 starts no later than the unit of gather
//    g), an upper bound for deeper prefetch;
//  * a bucket's reduce-scatter has finished by the end of the next compute op on the rank
//    (communication keeps pace with backward). A slower network holds buckets longer. With
//    prefetch 0 the next op waits for a gather that started with the reduce-scatter on the
//    same group; a reduce-scatter of fewer bytes has then finished before that op starts.
//  * an op's end and the starts it releases (gathers waiting for it) happen at one instant;
//    the walk counts them together, as the simulator's memory track does.
// The peak is the largest sum of activations, gathered parameters and buckets over every op
// of the walk, while it runs and just after it ends.
#include <vector>

#include "engine/scenario/strategy.hpp"
#include "engine/workload/schedule.hpp"

namespace stratagem::memory {

/// What one model unit allocates transiently, per micro-batch, in bytes.
struct UnitTransient {
  double act = 0;        ///< activations its forward keeps for backward
  double recompute = 0;  ///< extra bytes its recompute op rebuilds just before backward
  double gather = 0;     ///< its full parameters while gathered (parameters sharded)
  double bucket = 0;     ///< unsharded gradients its backward stages (gradients sharded)
};

struct StageTransientInput {
  scenario::Schedule schedule = scenario::Schedule::one_f_one_b;
  int pp = 1;
  int stage = 0;
  int chunks = 1;
  int microbatches = 1;
  /// chunk_units[chunk] = the units the chunk runs, in forward order.
  std::vector<std::vector<UnitTransient>> chunk_units;
  bool params_sharded = false;        ///< units are gathered for compute
  bool reshard_after_forward = true;  ///< see the header comment
  int prefetch = 1;                   ///< gathers that may run ahead of the unit computing
  bool grads_sharded = false;         ///< backward stages buckets for reduce-scatter
  /// Bucket cap in bytes when parameters are not sharded (ZeRO-2); ignored otherwise.
  double bucket_cap_bytes = 0;
  bool recompute = false;  ///< recompute ops exist (the backward runs per unit)
};

/// The transient bytes live at the peak moment, and the schedule's micro-batches in flight.
struct TransientPeak {
  double activations = 0;
  double gathered_params = 0;
  double comm_buckets = 0;
  /// Most (chunk, micro-batch) pairs whose forward has ended and backward has not: GPipe m;
  /// 1F1B min(p−s, m); interleaved min(Megatron's warm-up count + 1, m·chunks).
  int max_in_flight = 0;
  double total() const { return activations + gathered_params + comm_buckets; }
};

/// Walks the stage's schedule. Cost: O(m·chunks·(prefetch + log k) + k·units per chunk),
/// where k (small) is the number of distinct neighbourhoods an item of the schedule has.
TransientPeak stage_transient_peak(const StageTransientInput& input);

}  // namespace stratagem::memory
