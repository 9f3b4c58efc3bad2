#pragma once
// The step plan: one optimizer step of every rank as per-stream op lists with dependencies
// and memory effects. Built once by the builders (builder.hpp), then executed by the
// simulator (sim/) or the real runtime (engine/runtime). Executors never branch on the
// strategy: everything a strategy does is in the ops. The plan is immutable once built.
//
// Execution contract (both executors follow it):
//  * compute, collective and gather streams are FIFO: an op starts when it heads its stream,
//    the previous op on that stream has finished, and all its deps have finished.
//  * A collective additionally starts only when every member of its group has reached it
//    (all members' ops of the same CollectiveInstance are startable).
//  * p2p ops are not serialised on their stream: each is posted as soon as its deps have
//    finished (like isend/irecv); the transfer runs once both its send and recv are posted
//    and both finish when it has been delivered. Deps never cross ranks: a send and its recv
//    are paired by their transfer index (unique in the plan, usable as a message tag).
//  * Memory effects apply at op start or end; `initial` bytes are held for the whole step.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <memory>
#include <vector>

#include "engine/plan/inline_vector.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/work.hpp"

namespace stratagem::plan {

// The workload's vocabulary (engine/workload/work.hpp), which the plan's ops carry.
using workload::CollectiveKind;
using workload::Compute;
using workload::Phase;
using workload::to_string;
using workload::Unit;

using OpId = std::int32_t;
inline constexpr OpId kNoOp = -1;

/// `tp`: tensor-parallel collectives, on the critical path of the compute they split; `cp`:
/// context parallelism's K/V exchange, overlapped with the attention core it feeds.
/// `ep`: expert parallelism's token dispatch and combine (and expert tensor parallelism's
/// gathers), on the critical path as Megatron-Core's token dispatchers run them.
enum class Stream : std::uint8_t { compute, collective, gather, p2p, tp, cp, ep };
inline constexpr int kStreamCount = 7;
const char* to_string(Stream s);

/// What memory holds. `count` is the number of classes.
enum class TensorClass : std::uint8_t {
  params,           ///< parameters in the compute dtype (the local shard when sharded)
  grads,            ///< gradients kept across the step (local shard when sharded)
  optimizer,        ///< optimizer states (momentum, variance), local shard
  master_weights,   ///< fp32 master copy under mixed precision, local shard
  activations,      ///< tensors saved for backward
  gathered_params,  ///< ZeRO-3/FSDP: full parameters of units gathered for compute
  comm_buckets,     ///< unsharded gradients staged for reduce-scatter (ZeRO-2/3, FSDP)
  loss_scale,       ///< fp16 dynamic loss scale and found-inf flag
  fp8_weights,      ///< fp8 training: fp8 weight copies (and transposes), amax history, scales
  count
};
inline constexpr int kTensorClassCount = static_cast<int>(TensorClass::count);
const char* to_string(TensorClass c);

/// Why a collective exists (for display and for per-purpose accounting in results).
enum class CommPurpose : std::uint8_t {
  grad_sync,         ///< DDP all-reduce / ZeRO reduce-scatter of gradients
  param_gather,      ///< ZeRO-3/FSDP gather before compute, ZeRO-1/2 gather after the step
  tied_embedding,    ///< first/last pipeline stage sync of tied embedding gradients
  found_inf,         ///< fp16 overflow check across ranks
  tensor_parallel,   ///< Megatron TP/SP activations (all-reduce, or all-gather/reduce-scatter)
  context_parallel,  ///< ring attention's K/V (and dK/dV) exchange over the CP group
  /// Sequence parallelism's gradients of the norms and row-parallel biases, each rank's from
  /// its part of the sequence, all-reduced over the TP group before the optimizer step
  /// (Megatron's finalize_model_grads); counted with gradient sync in results.
  sequence_parallel_grads,
  /// Mixture-of-experts token dispatch and combine over the expert-parallel group (and the
  /// expert-tensor-parallel gathers of the dispatched tokens).
  expert_parallel
};
const char* to_string(CommPurpose p);

struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  CommPurpose purpose = CommPurpose::grad_sync;
  int group = 0;     ///< index into StepPlan::groups
  int instance = 0;  ///< index into StepPlan::collectives (same on every member)
  double bytes = 0;  ///< full (unsharded) buffer size S on each rank
  scenario::DType dtype = scenario::DType::fp32;
  int bucket = -1;     ///< gradient bucket or unit index, -1 if none
  int unit_begin = 0;  ///< units whose tensors it carries
  int unit_end = 0;
};

struct P2P {
  bool send = true;
  int peer = 0;
  int transfer = 0;  ///< index into StepPlan::transfers
  double bytes = 0;
  int microbatch = 0;
  int chunk = 0;
  bool gradient = false;  ///< false: activations going forward; true: gradients going back
  /// > 1: Megatron-LM's scatter/gather in the pipeline: the message is this rank's 1/gather
  /// share of the tensor, and the receiver all-gathers the shares over its TP group
  /// (pipeline.hpp). 1: the whole tensor.
  int gather = 1;
};

using Payload = std::variant<Compute, Collective, P2P>;

struct MemEffect {
  TensorClass cls = TensorClass::activations;
  double bytes = 0;    ///< positive: allocate, negative: free
  bool at_end = true;  ///< applied when the op ends (else when it starts)
};

/// An op's place in the chain of one unit's step that the tensor_parallel pass split it into
/// (workload::TpChains: compute pieces and TP/CP collectives, in order): piece `piece` of
/// `pieces`. A chain's pieces are contiguous in their rank's op order. piece = -1: no chain.
struct ChainLink {
  std::int16_t piece = -1;
  std::int16_t pieces = 0;
};

struct Op {
  OpId id = kNoOp;
  int rank = 0;
  Stream stream = Stream::compute;
  ChainLink chain;  ///< in the padding after `stream`: no memory of its own
  Payload payload;
  std::uint32_t dep_begin = 0, dep_count = 0;  ///< into StepPlan::deps
  std::uint32_t mem_begin = 0, mem_count = 0;  ///< into StepPlan::mem_effects
};

/// A process group: sorted global ranks. `intra_node` when all share one node.
struct Group {
  std::vector<int> ranks;
  bool intra_node = true;
  int nodes_spanned = 1;
  std::string label;  ///< "dp(stage 0)", "world", "tied(dp 3)", ...
};

struct CollectiveInstance {
  int group = 0;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;
  /// One per built member rank, in group order (folded: mostly one; inline, so the plan's
  /// hundred thousand instances are no allocations of their own).
  InlineVector<OpId, 2> ops;
};

struct Transfer {
  OpId send = kNoOp;
  OpId recv = kNoOp;
  int src = 0, dst = 0;
  double bytes = 0;
  int gather = 1;  ///< P2P::gather of its two ends
};

struct RankCoord {
  int dp = 0;     ///< index in the data-parallel group
  int stage = 0;  ///< pipeline stage
  int node = 0;
  int local_rank = 0;
  int tp = 0;  ///< index in the tensor-parallel group
  int cp = 0;  ///< index in the context-parallel group
};

/// Ranks → coordinates, groups, and which units each (stage, chunk) runs. Ranks are numbered
/// in the one order of scenario::MeshShape (parallel_dims.hpp): tensor-parallel fastest, then
/// context-parallel, data-parallel, pipeline.
struct Layout {
  int world = 1, dp = 1, pp = 1, tp = 1, cp = 1, chunks = 1, gpus_per_node = 1, nodes = 1;
  std::vector<RankCoord> coords;  ///< per rank
  std::vector<Unit> units;        ///< 0 embedding, 1..L blocks, L+1 head
  /// stage_chunk_units[stage][chunk] = [begin, end) of units; virtual stage = chunk·pp+stage
  std::vector<std::vector<std::pair<int, int>>> stage_chunk_units;
  scenario::MeshShape mesh() const { return {dp, pp, tp, cp}; }
  int rank_of(int stage, int dp_index, int tp_index = 0, int cp_index = 0) const {
    return mesh().rank_of(stage, dp_index, tp_index, cp_index);
  }
};

/// A rank's ops per stream, in issue order: `streams[s]` is a vector of op ids. Storage is
/// allocated on the first write, so the folded replicas of a million-GPU plan, which have no
/// ops, cost one pointer each rather than six empty vectors.
class RankStreams {
 public:
  using List = std::vector<OpId>;
  RankStreams() = default;
  RankStreams(const RankStreams& o)
      : lists_(o.lists_ ? std::make_unique<std::array<List, kStreamCount>>(*o.lists_) : nullptr) {}
  RankStreams& operator=(const RankStreams& o) {
    if (this != &o) {
      lists_ = o.lists_ ? std::make_unique<std::array<List, kStreamCount>>(*o.lists_) : nullptr;
    }
    return *this;
  }
  RankStreams(RankStreams&&) noexcept = default;
  RankStreams& operator=(RankStreams&&) noexcept = default;

  const List& operator[](int s) const { return lists_ ? (*lists_)[s] : empty(); }
  /// For writing (allocates).
  List& operator[](int s) {
    if (!lists_) lists_ = std::make_unique<std::array<List, kStreamCount>>();
    return (*lists_)[s];
  }
  /// Every stream, in Stream order (range-for).
  const List* begin() const { return lists_ ? lists_->data() : empties().data(); }
  const List* end() const { return begin() + kStreamCount; }
  static constexpr std::size_t size() { return kStreamCount; }

 private:
  static const List& empty() { return empties()[0]; }
  static const std::array<List, kStreamCount>& empties() {
    static const std::array<List, kStreamCount> none{};
    return none;
  }
  std::unique_ptr<std::array<List, kStreamCount>> lists_;
};

/// What each rank holds for the whole step (bytes per class) and what lives in host memory.
struct RankInfo {
  std::array<double, kTensorClassCount> initial{};  ///< resident GPU bytes per class
  double host_bytes = 0;                            ///< offloaded to CPU memory
  RankStreams streams;
  bool built = false;      ///< false for folded replicas (their representative has the ops)
  int representative = 0;  ///< the built rank with identical ops and timing
};

struct StepPlan {
  scenario::Scenario scenario;
  Layout layout;
  std::vector<Op> ops;
  std::vector<OpId> deps;
  std::vector<MemEffect> mem_effects;
  std::vector<Group> groups;
  std::vector<CollectiveInstance> collectives;
  std::vector<Transfer> transfers;
  std::vector<RankInfo> ranks;
  bool folded = false;  ///< only data-parallel (and tensor-parallel) index 0 of each stage built
  double model_flops_per_step = 0;  ///< 6·N·tokens + attention, without recomputation

  std::span<const OpId> deps_of(const Op& op) const {
    return {deps.data() + op.dep_begin, op.dep_count};
  }
  std::span<const MemEffect> effects_of(const Op& op) const {
    return {mem_effects.data() + op.mem_begin, op.mem_count};
  }
  std::vector<int> built_ranks() const;
};

}  // namespace stratagem::plan
