#pragma once
// A rank's plan while the passes build it: compute steps in schedule order, each with the ops
// that carry it out (its body: one compute op, or compute segments and tensor-parallel
// collectives) and the ops other passes anchor before or after it, plus a prologue and an
// epilogue. Ops refer to each other by draft index; lowering (lower_rank) turns the draft into
// the plan's ops with ids in draft order, collective instances and p2p transfers.
//
// Order of a rank's ops: prologue, then per step its `before` ops, its body and its `after`
// ops, then the epilogue. Ops anchored at one point are ordered by concern (Anchor), whatever
// order the passes ran in: gradient sync, then parameter gathers, then pipeline p2p.
#include <array>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/plan/build_context.hpp"
#include "engine/plan/inline_vector.hpp"

namespace stratagem::plan {

using DraftRef = int;
inline constexpr DraftRef kNoDraft = -1;

enum class Anchor : std::uint8_t { grad_sync, gather, p2p };
inline constexpr int kAnchorCount = 3;

/// An op before lowering. Collectives carry their group, kind, bytes and units (the instance
/// is assigned at lowering, in op order); p2p ops their peer, direction, chunk and micro-batch
/// (the transfer likewise).
using DraftDeps = InlineVector<DraftRef, 3>;
using DraftEffects = InlineVector<MemEffect, 2>;
struct DraftOp {
  Stream stream = Stream::compute;
  Payload payload;
  DraftDeps deps;
  DraftEffects effects;
  ChainLink chain;
};

/// One compute step of the schedule: a phase of units [unit_begin, unit_end) of one
/// (chunk, micro-batch). `item` indexes the stage's schedule order; `first_of_item` marks the
/// steps of the item's first unit (the recompute and backward of that unit, or its forward).
struct Step {
  Phase phase = Phase::forward;
  int item = 0;
  int chunk = 0;
  int microbatch = 0;
  int unit_begin = 0, unit_end = 0;
  bool first_of_item = false;
  bool last_of_item = false;
  std::vector<DraftRef> body;
  std::array<std::vector<DraftRef>, kAnchorCount> before, after;
  DraftRef first() const { return body.front(); }
  DraftRef last() const { return body.back(); }
};

struct RankDraft {
  int rank = 0;
  int stage = 0;
  std::vector<DraftOp> ops;
  std::vector<DraftRef> prologue;
  std::vector<Step> steps;
  std::vector<DraftRef> epilogue;
  /// The collectives the optimizer step waits for (gradient sync), in issue order, then the
  /// last compute; the precision pass may put its overflow check in between.
  std::vector<DraftRef> before_step;

  DraftRef add(Stream stream, const Payload& payload, DraftDeps deps = {},
               DraftEffects effects = {});
  /// The last op of the last step (the rank's last compute before the epilogue).
  DraftRef last_compute() const { return steps.empty() ? kNoDraft : steps.back().last(); }
  DraftOp& op(DraftRef r) { return ops[static_cast<std::size_t>(r)]; }
};

/// Adds a dep to a step (its first op) and a memory effect: at its end to its last compute op
/// (memory effects sit on compute ops; a tensor-parallel chain may end with a collective),
/// at its start to its first op.
void add_dep(RankDraft& d, const Step& step, DraftRef dep);
DraftRef end_compute(const RankDraft& d, const Step& step);
void add_effect(RankDraft& d, const Step& step, const MemEffect& effect);

/// A collective's payload before lowering, in the scenario's compute dtype.
Collective draft_collective(const BuildContext& ctx, CollectiveKind kind, CommPurpose purpose,
                            int group, double bytes, int bucket, int u0, int u1);

/// Appends the draft's ops to ctx.plan (ids in draft order) and registers collective
/// instances (the n-th collective a rank issues on a group is the group's n-th instance;
/// members must agree on kind and size) and transfers (paired by sender, receiver, direction,
/// sender's chunk and micro-batch).
class Lowering {
 public:
  explicit Lowering(BuildContext& ctx) : ctx_(ctx) {}
  void lower_rank(const RankDraft& draft);
  /// Every built rank's sends and receives have their other end.
  void check_pairs() const;

 private:
  void reserve(const RankDraft& draft);
  OpId emit(int rank, const DraftOp& op, const std::vector<OpId>& ids);

  struct TransferKeyHash {
    std::size_t operator()(const std::tuple<int, int, bool, int, int>& k) const {
      std::uint64_t h = 1469598103934665603ULL;
      for (std::uint64_t v : {std::uint64_t(std::get<0>(k)), std::uint64_t(std::get<1>(k)),
                              std::uint64_t(std::get<2>(k)), std::uint64_t(std::get<3>(k)),
                              std::uint64_t(std::get<4>(k))}) {
        h = (h ^ v) * 1099511628211ULL;
      }
      return h;
    }
  };

  BuildContext& ctx_;
  // The rank being lowered: (group, next sequence) of the few groups it issues on.
  std::vector<std::pair<int, int>> next_seq_;
  std::vector<std::vector<int>> group_instances_;  // [group][sequence] → instance
  std::unordered_map<std::tuple<int, int, bool, int, int>, int, TransferKeyHash> transfer_index_;
};

}  // namespace stratagem::plan
