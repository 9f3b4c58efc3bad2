// Exact closed forms of the α-β network model.
#include <gtest/gtest.h>

#include "sim/network_model.hpp"

namespace stratagem::sim {
namespace {

constexpr double B = 100e9;    // 100 GB/s
constexpr double A = 2e-6;     // 2 µs
constexpr double S = 1 << 30;  // 1 GiB
const scenario::LinkSpec kLink{B, A};
constexpr auto kIntra = LinkKind::intra_node;

TEST(NetworkModel, RingAllReduce) {
  for (int n : {2, 3, 8, 64}) {
    const CommPhase p = ring_all_reduce(n, S, kLink, kIntra);
    EXPECT_DOUBLE_EQ(p.transfer_s, 2.0 * (n - 1) / n * S / B) << n;
    EXPECT_DOUBLE_EQ(p.latency_s, 2.0 * (n - 1) * A) << n;
  }
  const CommPhase one = ring_all_reduce(1, S, kLink, kIntra);
  EXPECT_EQ(one.transfer_s + one.latency_s, 0.0);
}

TEST(NetworkModel, TreeAllReduce) {
  EXPECT_DOUBLE_EQ(tree_all_reduce(8, S, kLink, kIntra).transfer_s, 2.0 * S / B);
  EXPECT_DOUBLE_EQ(tree_all_reduce(8, S, kLink, kIntra).latency_s, 2.0 * 3 * A);
  EXPECT_DOUBLE_EQ(tree_all_reduce(9, S, kLink, kIntra).latency_s, 2.0 * 4 * A);
  EXPECT_DOUBLE_EQ(tree_all_reduce(1024, S, kLink, kIntra).latency_s, 2.0 * 10 * A);
}

TEST(NetworkModel, ReduceScatterAllGatherBroadcast) {
  for (int n : {2, 4, 8}) {
    const CommPhase rs = ring_reduce_scatter(n, S, kLink, kIntra);
    const CommPhase ag = ring_all_gather(n, S, kLink, kIntra);
    EXPECT_DOUBLE_EQ(rs.transfer_s, (n - 1.0) / n * S / B);
    EXPECT_DOUBLE_EQ(rs.latency_s, (n - 1.0) * A);
    EXPECT_DOUBLE_EQ(ag.transfer_s, rs.transfer_s);
    EXPECT_DOUBLE_EQ(ag.latency_s, rs.latency_s);
  }
  EXPECT_DOUBLE_EQ(ring_broadcast(8, S, kLink, kIntra).latency_s, 7 * A);
  EXPECT_DOUBLE_EQ(tree_broadcast(8, S, kLink, kIntra).latency_s, 3 * A);
  EXPECT_DOUBLE_EQ(tree_broadcast(8, S, kLink, kIntra).transfer_s, S / B);
}

TEST(NetworkModel, FlatGroupUsesOnePhase) {
  AlphaBetaNetwork net(kLink, {25e9, 5e-6}, Algorithm::ring);
  const CommPhases p = net.collective(plan::CollectiveKind::all_reduce, {8, 1, 8}, S);
  ASSERT_EQ(p.count, 1);
  EXPECT_EQ(p.phase[0].link, LinkKind::intra_node);
  EXPECT_DOUBLE_EQ(p.total_s(), 2.0 * 7 / 8 * S / B + 14 * A);
  EXPECT_EQ(net.collective(plan::CollectiveKind::all_reduce, {1, 1, 1}, S).count, 0);
}

TEST(NetworkModel, HierarchicalAllReduceAcrossNodes) {
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork net(kLink, inter, Algorithm::ring);
  // 32 ranks on 4 nodes, 8 per node.
  const CommPhases p = net.collective(plan::CollectiveKind::all_reduce, {32, 4, 8}, S);
  ASSERT_EQ(p.count, 3);
  EXPECT_EQ(p.phase[0].link, LinkKind::intra_node);
  EXPECT_EQ(p.phase[1].link, LinkKind::inter_node);
  EXPECT_EQ(p.phase[2].link, LinkKind::intra_node);
  EXPECT_DOUBLE_EQ(p.phase[0].transfer_s, 7.0 / 8 * S / B);
  // NCCL's ring passes every GPU: 7 NVLink hops in each of the 4 nodes (tuning.cc).
  EXPECT_DOUBLE_EQ(p.phase[0].latency_s, 4 * 7 * A);
  EXPECT_DOUBLE_EQ(p.phase[2].latency_s, 4 * 7 * A);
  EXPECT_DOUBLE_EQ(p.phase[1].transfer_s, 2.0 * 3 / 4 * (S / 8) / inter.bandwidth);
  EXPECT_DOUBLE_EQ(p.phase[1].latency_s, 2.0 * 3 * inter.latency);
  EXPECT_DOUBLE_EQ(p.phase[2].transfer_s, p.phase[0].transfer_s);
  // One member per node: only the inter-node ring remains.
  const CommPhases q = net.collective(plan::CollectiveKind::all_reduce, {4, 4, 1}, S);
  ASSERT_EQ(q.count, 1);
  EXPECT_DOUBLE_EQ(q.total_s(), 2.0 * 3 / 4 * S / inter.bandwidth + 6 * inter.latency);
}

TEST(NetworkModel, HierarchicalReduceScatterAndAllGather) {
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork net(kLink, inter, Algorithm::ring);
  const CommPhases rs = net.collective(plan::CollectiveKind::reduce_scatter, {16, 2, 8}, S);
  ASSERT_EQ(rs.count, 2);
  EXPECT_DOUBLE_EQ(rs.phase[0].transfer_s, 7.0 / 8 * S / B);
  EXPECT_DOUBLE_EQ(rs.phase[1].transfer_s, 1.0 / 2 * (S / 8) / inter.bandwidth);
  const CommPhases ag = net.collective(plan::CollectiveKind::all_gather, {16, 2, 8}, S);
  ASSERT_EQ(ag.count, 2);
  EXPECT_EQ(ag.phase[0].link, LinkKind::inter_node);
  EXPECT_DOUBLE_EQ(ag.total_s(), rs.total_s());
  // Latency as NCCL's ring model: nRanks − nNodes NVLink hops and nNodes − 1 network hops.
  EXPECT_DOUBLE_EQ(rs.phase[0].latency_s + rs.phase[1].latency_s,
                   (16 - 2) * A + (2 - 1) * inter.latency);
}

TEST(NetworkModel, TreeAllReduceAcrossNodesCrossesOneNodesNvlinkOnly) {
  // NCCL's tree: k − 1 hops up and down inside a node, 2⌈log2 nodes⌉ between nodes; the ring
  // would cross every node's NVLink, so at many nodes and a small message the tree wins.
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork tree(kLink, inter, Algorithm::tree);
  const CommPhases t = tree.collective(plan::CollectiveKind::all_reduce, {512, 64, 8}, 8);
  ASSERT_EQ(t.count, 3);
  EXPECT_DOUBLE_EQ(t.phase[0].latency_s, 7 * A);
  EXPECT_DOUBLE_EQ(t.phase[1].latency_s, 2.0 * 6 * inter.latency);
  AlphaBetaNetwork fastest(kLink, inter, Algorithm::fastest);
  EXPECT_DOUBLE_EQ(fastest.collective(plan::CollectiveKind::all_reduce, {512, 64, 8}, 8).total_s(),
                   t.total_s());
  AlphaBetaNetwork ring(kLink, inter, Algorithm::ring);
  const CommPhases r = ring.collective(plan::CollectiveKind::all_reduce, {512, 64, 8}, 8);
  EXPECT_DOUBLE_EQ(r.phase[0].latency_s + r.phase[2].latency_s, 2.0 * (512 - 64) * A);
  EXPECT_GT(r.total_s(), t.total_s());
}

TEST(NetworkModel, FastestPicksTreeForSmallMessagesRingForLarge) {
  AlphaBetaNetwork net(kLink, {25e9, 5e-6}, Algorithm::fastest);
  const double small = 8;
  const CommPhases s = net.collective(plan::CollectiveKind::all_reduce, {64, 1, 64}, small);
  EXPECT_DOUBLE_EQ(s.total_s(), tree_all_reduce(64, small, kLink, kIntra).latency_s +
                                    tree_all_reduce(64, small, kLink, kIntra).transfer_s);
  const CommPhases l = net.collective(plan::CollectiveKind::all_reduce, {64, 1, 64}, S);
  const CommPhase ring = ring_all_reduce(64, S, kLink, kIntra);
  EXPECT_DOUBLE_EQ(l.total_s(), ring.latency_s + ring.transfer_s);
}

// β terms run at bandwidth · efficiency (NCCL's bus bandwidth); latencies are unchanged.
TEST(NetworkModel, LinkEfficiencyScalesTransfersNotLatency) {
  scenario::LinkSpec slow = kLink;
  slow.efficiency = 0.8;
  for (int n : {2, 8}) {
    const CommPhase full = ring_all_reduce(n, S, kLink, kIntra);
    const CommPhase p = ring_all_reduce(n, S, slow, kIntra);
    EXPECT_DOUBLE_EQ(p.transfer_s, full.transfer_s / 0.8) << n;
    EXPECT_DOUBLE_EQ(p.latency_s, full.latency_s) << n;
  }
  AlphaBetaNetwork net(slow, slow, Algorithm::ring);
  EXPECT_DOUBLE_EQ(net.p2p(true, S).total_s(), S / (0.8 * B) + A);
}

TEST(NetworkModel, PointToPoint) {
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork net(kLink, inter, Algorithm::ring);
  EXPECT_DOUBLE_EQ(net.p2p(true, S).total_s(), S / B + A);
  EXPECT_DOUBLE_EQ(net.p2p(false, S).total_s(), S / inter.bandwidth + inter.latency);
  EXPECT_EQ(net.p2p(false, S).phase[0].link, LinkKind::inter_node);
}

// Megatron-LM's scatter/gather of a pipeline message (plan::P2P::gather): the 1/t share over
// the network, then the receiving TP group's ring all-gather of the whole tensor on NVLink.
TEST(NetworkModel, ScatteredP2pIsTheShareThenTheTpGroupsAllGather) {
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork net(kLink, inter, Algorithm::ring);
  const double share = S / 8;
  const CommPhases p = net.scattered_p2p(false, share, 8, 8);
  ASSERT_EQ(p.count, 2);
  EXPECT_EQ(p.phase[0].link, LinkKind::inter_node);
  EXPECT_DOUBLE_EQ(p.phase[0].transfer_s + p.phase[0].latency_s, share / 25e9 + 5e-6);
  EXPECT_EQ(p.phase[1].link, LinkKind::intra_node);
  EXPECT_DOUBLE_EQ(p.phase[1].transfer_s, 7.0 / 8 * S / B);
  EXPECT_DOUBLE_EQ(p.phase[1].latency_s, 7 * A);
  // Cheaper than the whole tensor between nodes, as Megatron-LM meant it.
  EXPECT_LT(p.total_s(), net.p2p(false, S).total_s());
}

TEST(NetworkModel, AllToAllSendsOneNthToEachPeer) {
  const scenario::LinkSpec inter{25e9, 5e-6};
  AlphaBetaNetwork net(kLink, inter, Algorithm::fastest);
  // 8 ranks on one node: 7/8 of the buffer leaves each rank, one α per peer.
  const CommPhases one = net.collective(plan::CollectiveKind::all_to_all, {8, 1, 8}, S);
  ASSERT_EQ(one.count, 1);
  EXPECT_DOUBLE_EQ(one.phase[0].transfer_s, 7.0 / 8 * S / B);
  EXPECT_DOUBLE_EQ(one.phase[0].latency_s, 7 * A);
  // 32 ranks on 4 nodes: 7/32 to the node's peers over NVLink, 24/32 over the network.
  const CommPhases four = net.collective(plan::CollectiveKind::all_to_all, {32, 4, 8}, S);
  ASSERT_EQ(four.count, 2);
  EXPECT_EQ(four.phase[0].link, LinkKind::intra_node);
  EXPECT_DOUBLE_EQ(four.phase[0].transfer_s, 7.0 / 32 * S / B);
  EXPECT_EQ(four.phase[1].link, LinkKind::inter_node);
  EXPECT_DOUBLE_EQ(four.phase[1].transfer_s, 24.0 / 32 * S / inter.bandwidth);
  EXPECT_DOUBLE_EQ(four.phase[1].latency_s, 24 * inter.latency);
  // One rank per node: the network part alone.
  const CommPhases spread = net.collective(plan::CollectiveKind::all_to_all, {4, 4, 1}, S);
  ASSERT_EQ(spread.count, 1);
  EXPECT_DOUBLE_EQ(spread.phase[0].transfer_s, 3.0 / 4 * S / inter.bandwidth);
}

}  // namespace
}  // namespace stratagem::sim
