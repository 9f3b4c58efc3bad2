#pragma once
// Where one rank keeps its model states, read off its ops in the plan (never off the
// strategy's name). The rank's units are laid out in ascending order in flat buffers and
// grouped into *segments*: the unit sets its gradient collectives carry (a DDP/ZeRO bucket,
// or one unit under ZeRO-3/FSDP). A segment is padded to a multiple of its shard group so
// reduce-scatter and all-gather act on equal contiguous shards.
//
//   params_sharded  a parameter all-gather of the segment's units precedes the optimizer
//                   (ZeRO-3/FSDP): only the rank's shard is resident, compute uses gathers.
//   grads_staged    backward ops stage unsharded gradients (a comm_buckets allocation) that a
//                   reduce-scatter consumes (ZeRO-2/3, FSDP): only a gradient shard is resident.
//   opt_sharded     the segment's gradients are reduce-scattered (ZeRO-1 and up): the
//                   optimizer updates the rank's shard.
// The *opt space* is where optimizer states live: the concatenated shards when opt_sharded,
// else the full layout.
#include <cstdint>
#include <vector>

#include "engine/plan/plan.hpp"

namespace stratagem::runtime {

struct Segment {
  std::vector<int> units;                 ///< ascending
  std::vector<std::int64_t> unit_offset;  ///< of each unit inside the segment
  std::int64_t numel = 0;                 ///< sum of the units' elements
  std::int64_t padded = 0;                ///< numel rounded up to a multiple of shard_size
  std::int64_t shard = 0;                 ///< padded / shard_size
  std::int64_t full_offset = 0;           ///< into the full layout
  std::int64_t shard_offset = 0;          ///< into the concatenated shards
  std::vector<int> shard_group;           ///< ranks sharing it (just this rank when unsharded)
  int shard_index = 0;                    ///< this rank's position in shard_group
  std::int64_t opt_offset = 0;            ///< into the opt space
  std::int64_t opt_numel = 0;             ///< shard when opt_sharded, else padded
};

struct RankLayout {
  int rank = 0;
  std::vector<int> units;            ///< owned, ascending
  std::vector<Segment> segments;     ///< ascending by first unit
  std::vector<int> segment_of_unit;  ///< per global unit, −1 when not owned
  std::int64_t full_numel = 0;
  std::int64_t shard_numel = 0;
  std::int64_t opt_numel = 0;
  bool params_sharded = false;
  bool grads_staged = false;
  bool opt_sharded = false;
  plan::OpId optimizer_op = plan::kNoOp;

  const Segment& segment_of(int unit) const;
  /// Offset of `unit` inside its segment.
  std::int64_t offset_in_segment(int unit) const;
};

/// Derives the layout from `rank`'s ops. `unit_numel[u]` is the runtime's element count of
/// unit u; it must equal the plan's Unit::params (RuntimeError otherwise).
RankLayout derive_rank_layout(const plan::StepPlan& plan, int rank,
                              const std::vector<std::int64_t>& unit_numel);

/// The ops of `rank` in id order (all streams).
std::vector<plan::OpId> rank_ops(const plan::StepPlan& plan, int rank);

}  // namespace stratagem::runtime
