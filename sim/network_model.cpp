#include "sim/network_model.hpp"

#include <algorithm>

#include "engine/scenario/error.hpp"

namespace stratagem::sim {

const char* to_string(LinkKind k) {
  return k == LinkKind::intra_node ? "intra_node" : "inter_node";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    case Algorithm::fastest:
      return "fastest";
  }
  return "?";
}

units::Seconds CommPhases::total_s() const {
  units::Seconds t = 0;
  for (int i = 0; i < count; ++i) t += phase[i].latency_s + phase[i].transfer_s;
  return t;
}

namespace {

int ceil_log2(int n) {
  int steps = 0;
  for (int reach = 1; reach < n; reach *= 2) ++steps;
  return steps;
}

units::Seconds beta(units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind) {
  if (bytes <= 0) return 0;
  if (link.bandwidth <= 0) {
    throw SpecError(kind == LinkKind::intra_node ? "cluster.intra_node.bandwidth_GBps"
                                                 : "cluster.inter_node.bandwidth_GBps",
                    "must be > 0: the plan sends data over this link");
  }
  return bytes / link.effective_bandwidth();
}

}  // namespace

CommPhase ring_all_reduce(int n, units::Bytes bytes, const scenario::LinkSpec& link,
                          LinkKind kind) {
  if (n <= 1) return {kind, 0, 0};
  const double steps = 2.0 * (n - 1);
  return {kind, steps * link.latency, beta(steps / n * bytes, link, kind)};
}

CommPhase tree_all_reduce(int n, units::Bytes bytes, const scenario::LinkSpec& link,
                          LinkKind kind) {
  if (n <= 1) return {kind, 0, 0};
  // Reduce up and broadcast down two complementary binary trees, each carrying half the
  // data: every rank sends S in each direction of the pass, in 2·⌈log2 n⌉ latency steps.
  return {kind, 2.0 * ceil_log2(n) * link.latency, beta(2.0 * bytes, link, kind)};
}

CommPhase ring_reduce_scatter(int n, units::Bytes bytes, const scenario::LinkSpec& link,
                              LinkKind kind) {
  if (n <= 1) return {kind, 0, 0};
  const double steps = n - 1.0;
  return {kind, steps * link.latency, beta(steps / n * bytes, link, kind)};
}

CommPhase ring_all_gather(int n, units::Bytes bytes, const scenario::LinkSpec& link,
                          LinkKind kind) {
  return ring_reduce_scatter(n, bytes, link, kind);
}

CommPhase ring_broadcast(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind) {
  if (n <= 1) return {kind, 0, 0};
  return {kind, (n - 1.0) * link.latency, beta(bytes, link, kind)};
}

CommPhase tree_broadcast(int n, units::Bytes bytes, const scenario::LinkSpec& link, LinkKind kind) {
  if (n <= 1) return {kind, 0, 0};
  return {kind, ceil_log2(n) * link.latency, beta(bytes, link, kind)};
}

CommPhase pairwise_exchange(int peers, units::Bytes bytes, const scenario::LinkSpec& link,
                            LinkKind kind) {
  if (peers <= 0) return {kind, 0, 0};
  return {kind, peers * link.latency, beta(bytes, link, kind)};
}

const scenario::LinkSpec& AlphaBetaNetwork::link(LinkKind kind) const {
  return kind == LinkKind::intra_node ? intra_ : inter_;
}

CommPhase AlphaBetaNetwork::all_reduce(int n, units::Bytes bytes, LinkKind kind) const {
  const CommPhase ring = ring_all_reduce(n, bytes, link(kind), kind);
  if (algorithm_ == Algorithm::ring) return ring;
  const CommPhase tree = tree_all_reduce(n, bytes, link(kind), kind);
  if (algorithm_ == Algorithm::tree) return tree;
  return tree.latency_s + tree.transfer_s < ring.latency_s + ring.transfer_s ? tree : ring;
}

CommPhase AlphaBetaNetwork::broadcast(int n, units::Bytes bytes, LinkKind kind) const {
  const CommPhase ring = ring_broadcast(n, bytes, link(kind), kind);
  if (algorithm_ == Algorithm::ring) return ring;
  return tree_broadcast(n, bytes, link(kind), kind);  // never slower than the chain
}

CommPhases AlphaBetaNetwork::collective(plan::CollectiveKind kind, const GroupShape& g,
                                        units::Bytes bytes) const {
  CommPhases out;
  if (g.size <= 1) return out;
  auto add = [&](const CommPhase& p) {
    if (p.latency_s > 0 || p.transfer_s > 0) out.add(p);
  };
  constexpr LinkKind intra = LinkKind::intra_node, inter = LinkKind::inter_node;
  if (g.nodes <= 1) {
    switch (kind) {
      case plan::CollectiveKind::all_reduce:
        add(all_reduce(g.size, bytes, intra));
        break;
      case plan::CollectiveKind::reduce_scatter:
        add(ring_reduce_scatter(g.size, bytes, intra_, intra));
        break;
      case plan::CollectiveKind::all_gather:
        add(ring_all_gather(g.size, bytes, intra_, intra));
        break;
      case plan::CollectiveKind::broadcast:
        add(broadcast(g.size, bytes, intra));
        break;
      case plan::CollectiveKind::all_to_all:
        add(pairwise_exchange(g.size - 1, (g.size - 1.0) / g.size * bytes, intra_, intra));
        break;
    }
    return out;
  }
  // Across nodes the data moves hierarchically (inside the node at 1/k of it per network
  // link: each node's k NICs carry 1/k), but NCCL's ring is one ring through every GPU, so
  // its latency counts (k − 1) NVLink hops in each node, nodes·(k − 1) in all, plus
  // nodes − 1 network hops: NCCL's own model (src/graph/tuning.cc, (nsteps − nInterSteps) ·
  // intraLat + nInterSteps · interLat). Its tree all-reduce goes up and down inside one node
  // (k − 1 hops each way) and 2⌈log2 nodes⌉ network hops.
  const int k = g.per_node, nodes = g.nodes;
  const units::Bytes shard = bytes / k;
  auto through_every_node = [nodes](CommPhase p) {
    p.latency_s *= nodes;
    return p;
  };
  switch (kind) {
    case plan::CollectiveKind::all_reduce: {
      const CommPhase rs = ring_reduce_scatter(k, bytes, intra_, intra);
      const CommPhase ag = ring_all_gather(k, bytes, intra_, intra);
      const CommPhase ring = ring_all_reduce(nodes, shard, inter_, inter);
      const CommPhase tree = tree_all_reduce(nodes, shard, inter_, inter);
      const double inside = rs.latency_s + rs.transfer_s + ag.latency_s + ag.transfer_s;
      const double ring_s = inside + (nodes - 1) * (rs.latency_s + ag.latency_s) +
                            ring.latency_s + ring.transfer_s;
      const double tree_s = inside + tree.latency_s + tree.transfer_s;
      const bool use_tree = algorithm_ == Algorithm::tree ||
                            (algorithm_ == Algorithm::fastest && tree_s < ring_s);
      add(use_tree ? rs : through_every_node(rs));
      add(use_tree ? tree : ring);
      add(use_tree ? ag : through_every_node(ag));
      break;
    }
    case plan::CollectiveKind::reduce_scatter:
      add(through_every_node(ring_reduce_scatter(k, bytes, intra_, intra)));
      add(ring_reduce_scatter(nodes, shard, inter_, inter));
      break;
    case plan::CollectiveKind::all_gather:
      add(ring_all_gather(nodes, shard, inter_, inter));
      add(through_every_node(ring_all_gather(k, bytes, intra_, intra)));
      break;
    case plan::CollectiveKind::broadcast:
      add(broadcast(nodes, bytes, inter));
      add(broadcast(k, bytes, intra));
      break;
    case plan::CollectiveKind::all_to_all: {
      // NCCL's all-to-all is flat (a send and a receive per peer, no staging through the node):
      // 1/n of the buffer to each of the k − 1 peers inside the node, and to each of the
      // n − k outside it over the rank's own network link.
      const double n = g.size;
      add(pairwise_exchange(k - 1, (k - 1) / n * bytes, intra_, intra));
      add(pairwise_exchange(g.size - k, (n - k) / n * bytes, inter_, inter));
      break;
    }
  }
  return out;
}

CommPhases AlphaBetaNetwork::p2p(bool same_node, units::Bytes bytes) const {
  const LinkKind kind = same_node ? LinkKind::intra_node : LinkKind::inter_node;
  const scenario::LinkSpec& l = link(kind);
  CommPhases out;
  out.add({kind, l.latency, beta(bytes, l, kind)});
  return out;
}

CommPhases NetworkModel::scattered_p2p(bool same_node, units::Bytes share, int gather,
                                       int gpus_per_node) const {
  CommPhases out = p2p(same_node, share);
  const int per_node = std::min(gather, std::max(gpus_per_node, 1));
  const GroupShape tp{gather, (gather + per_node - 1) / per_node, per_node};
  const CommPhases all = collective(plan::CollectiveKind::all_gather, tp, share * gather);
  for (int i = 0; i < all.count && out.count < static_cast<int>(out.phase.size()); ++i) {
    out.add(all.phase[i]);
  }
  return out;
}

scenario::CommOp comm_op(plan::CollectiveKind kind) {
  switch (kind) {
    case plan::CollectiveKind::all_reduce:
      return scenario::CommOp::all_reduce;
    case plan::CollectiveKind::reduce_scatter:
      return scenario::CommOp::reduce_scatter;
    case plan::CollectiveKind::all_gather:
      return scenario::CommOp::all_gather;
    case plan::CollectiveKind::broadcast:
      return scenario::CommOp::broadcast;
    case plan::CollectiveKind::all_to_all:
      // Not measured: its time comes from the α-β links (CalibratedNetwork), its backend
      // wake-up and its slowdown of concurrent compute are taken as an all-reduce's.
      return scenario::CommOp::all_reduce;
  }
  return scenario::CommOp::all_reduce;
}

namespace {

double ring_steps(scenario::CommOp op, int n) {
  return op == scenario::CommOp::all_reduce ? 2.0 * (n - 1) : n - 1.0;
}

units::Seconds measured_beta(const scenario::MeasuredComm& m, double bytes, scenario::CommOp op) {
  if (bytes <= 0) return 0;
  if (m.bus_bandwidth <= 0) {
    throw SpecError(std::string("cluster.calibration.") + scenario::to_string(op) + ".busbw_GBps",
                    "must be > 0: the plan sends data this way");
  }
  return bytes / m.bus_bandwidth;
}

}  // namespace

CommPhases CalibratedNetwork::collective(plan::CollectiveKind kind, const GroupShape& g,
                                         units::Bytes bytes) const {
  if (g.nodes > 1 || kind == plan::CollectiveKind::all_to_all) {
    return fallback_.collective(kind, g, bytes);
  }
  CommPhases out;
  if (g.size <= 1) return out;
  const scenario::CommOp op = comm_op(kind);
  const scenario::MeasuredComm& m = cal_.at(op);
  const int measured = std::max(cal_.processes, 2);
  const double alpha = m.alpha_s * ring_steps(op, g.size) / ring_steps(op, measured);
  out.add({LinkKind::intra_node, alpha,
           measured_beta(m, scenario::bus_factor(op, g.size) * bytes, op)});
  return out;
}

CommPhases CalibratedNetwork::p2p(bool same_node, units::Bytes bytes) const {
  if (!same_node) return fallback_.p2p(same_node, bytes);
  const scenario::MeasuredComm& m = cal_.at(scenario::CommOp::sendrecv);
  CommPhases out;
  out.add({LinkKind::intra_node, m.alpha_s, measured_beta(m, bytes, scenario::CommOp::sendrecv)});
  return out;
}

}  // namespace stratagem::sim
