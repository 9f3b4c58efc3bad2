#pragma once
// How finely a rank's compute steps are cut: the whole chunk of units per step, or one unit per
// step. The plan's schedule pass cuts its steps so, and the memory model walks the same cuts.

namespace stratagem::workload {

struct Granularity {
  bool per_unit_forward = false;
  /// Backward per unit on micro-batches that launch gradient sync, and on the others.
  bool per_unit_backward_sync = false;
  bool per_unit_backward = false;
};

/// Forward runs per unit when parameters are gathered one unit at a time (ZeRO-3/FSDP: the
/// gather of the next unit overlaps this one's compute); backward also when recomputation
/// reruns each unit before its backward, and when gradients leave in several buckets that a
/// per-unit backward can launch early (on micro-batches that sync, `syncs_grads`; on every one
/// when gradients are sharded, `shards_grads`, as ZeRO-2 reduce-scatters each time).
inline Granularity step_granularity(bool gathers_params, bool recompute, bool syncs_grads,
                                    bool shards_grads, bool several_buckets) {
  Granularity g;
  g.per_unit_forward = gathers_params;
  g.per_unit_backward_sync = gathers_params || recompute || (syncs_grads && several_buckets);
  g.per_unit_backward = gathers_params || recompute || (shards_grads && several_buckets);
  return g;
}

}  // namespace stratagem::workload
