#pragma once
// How long communication takes: α-β per link (latency α, bandwidth B per GPU per
// direction). A collective or p2p message becomes up to three phases run one after another;
// each phase waits its latency, then moves its bytes over one link kind of every member,
// sharing each link's bandwidth with the other flows on it (the simulator's FlowNetwork).
//
// Closed forms on one link, n ranks, S bytes (the full buffer on each rank):
//   ring all-reduce      2(n−1)/n · S/B + 2(n−1)·α
//   tree all-reduce      2·S/B + 2·⌈log2 n⌉·α    (NCCL's pipelined double binary tree)
//   ring reduce-scatter  (n−1)/n · S/B + (n−1)·α      ring all-gather: the same
//   broadcast            S/B + (n−1)·α (ring chain) or S/B + ⌈log2 n⌉·α (tree)
//   p2p                  S/B + α
//   all-to-all           (n−1)/n · S/B + (n−1)·α   (pairwise: 1/n of S to each peer)
// Groups spanning nodes go hierarchical: all-reduce = intra-node reduce-scatter, inter-node
// all-reduce of the 1/k shard (k members per node), intra-node all-gather; reduce-scatter =
// intra then inter reduce-scatter; all-gather = inter then intra all-gather; broadcast =
// inter then intra; all-to-all (flat, as NCCL's) = the (k−1)/n · S to peers inside the node
// over NVLink, then the (n−k)/n · S to the n − k peers outside over the network, one α per
// peer. With one member per node only the inter-node part remains.
#include <array>
#include <cstdint>

#include "engine/plan/plan.hpp"
#include "engine/scenario/cluster.hpp"

namespace stratagem::sim {

enum class LinkKind : std::uint8_t { intra_node, inter_node };
const char* to_string(LinkKind k);

struct CommPhase {
  LinkKind link = LinkKind::intra_node;
  units::Seconds latency_s = 0;   ///< α terms: not shared between flows
  units::Seconds transfer_s = 0;  ///< β terms at the link's full bandwidth
};

struct CommPhases {
  std::array<CommPhase, 3> phase{};
  int count = 0;
  void add(const CommPhase& p) { phase[count++] = p; }
  units::Seconds total_s() const;
};

/// Where a group's members sit: `size` ranks on `nodes` nodes, at most `per_node` on one.
struct GroupShape {
  int size = 1;
  int nodes = 1;
  int per_node = 1;
};

enum class Algorithm : std::uint8_t {
  ring,
  tree,
  fastest  ///< whichever of ring and tree is faster for the message, as NCCL's tuner picks
};
const char* to_string(Algorithm a);

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  virtual CommPhases collective(plan::CollectiveKind kind, const GroupShape& group,
                                units::Bytes bytes) const = 0;
  virtual CommPhases p2p(bool same_node, units::Bytes bytes) const = 0;
  /// A pipeline message under Megatron-LM's scatter/gather (plan::P2P::gather): this rank's
  /// `share` of the tensor as p2p, then the receiving TP group of `gather` ranks all-gathers
  /// the whole tensor (gather · share bytes) over ⌈gather / gpus_per_node⌉ nodes. The phases
  /// beyond CommPhases' three are dropped (a p2p is one phase, an all-gather at most two).
  CommPhases scattered_p2p(bool same_node, units::Bytes share, int gather, int gpus_per_node) const;
};

// The single-link closed forms above.
CommPhase ring_all_reduce(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind);
CommPhase tree_all_reduce(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind);
CommPhase ring_reduce_scatter(int n, units::Bytes bytes, const scenario::LinkSpec& link,
                              LinkKind kind);
CommPhase ring_all_gather(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind);
CommPhase ring_broadcast(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind);
CommPhase tree_broadcast(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind);
/// A pairwise exchange with `peers` peers moving `bytes` in all out of (and into) each rank:
/// peers·α + bytes/B (an all-to-all's part on one link kind).
CommPhase pairwise_exchange(int peers, units::Bytes bytes, const scenario::LinkSpec& link,
                            LinkKind kind);

class AlphaBetaNetwork final : public NetworkModel {
 public:
  AlphaBetaNetwork(scenario::LinkSpec intra, scenario::LinkSpec inter, Algorithm algorithm)
      : intra_(intra), inter_(inter), algorithm_(algorithm) {}
  CommPhases collective(plan::CollectiveKind kind, const GroupShape& group,
                        units::Bytes bytes) const override;
  CommPhases p2p(bool same_node, units::Bytes bytes) const override;

 private:
  CommPhase all_reduce(int n, units::Bytes bytes, LinkKind kind) const;
  CommPhase broadcast(int n, units::Bytes bytes, LinkKind kind) const;
  const scenario::LinkSpec& link(LinkKind kind) const;

  scenario::LinkSpec intra_, inter_;
  Algorithm algorithm_;
};

/// Communication inside a node costed from measurements (a hardware profile's network
/// section, scenario::CommCalibration) instead of closed forms on a link: a collective of kind k
/// on n ranks with an S-byte buffer takes
///   α_k · steps(k, n) / steps(k, n₀) + bus_factor(k, n) · S / busbw_k
/// where n₀ is the measured group size, steps = 2(n−1) for all-reduce and n−1 for the others
/// (ring steps; exact at n = n₀), and a p2p message α_p2p + S / busbw_p2p. One phase on the
/// intra-node link, so concurrent transfers still share it. Groups spanning nodes and
/// messages between nodes, and all-to-all (no measured figure), fall back to `fallback` (the
/// cluster's α-β links).
class CalibratedNetwork final : public NetworkModel {
 public:
  CalibratedNetwork(scenario::CommCalibration calibration, AlphaBetaNetwork fallback)
      : cal_(std::move(calibration)), fallback_(std::move(fallback)) {}
  CommPhases collective(plan::CollectiveKind kind, const GroupShape& group,
                        units::Bytes bytes) const override;
  CommPhases p2p(bool same_node, units::Bytes bytes) const override;

 private:
  scenario::CommCalibration cal_;
  AlphaBetaNetwork fallback_;
};

/// The measured operation a collective of this kind is costed as.
scenario::CommOp comm_op(plan::CollectiveKind kind);

}  // namespace stratagem::sim
