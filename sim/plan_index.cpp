#include "sim/plan_index.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "engine/scenario/error.hpp"

namespace stratagem::sim {

namespace {

// The NVLink domain of a rank: its node, or with domains of several nodes (GB200 NVL72) the
// domain's index; `intra_node` links join its members.
int domain_of(const plan::StepPlan& plan, int rank) {
  const auto& coords = plan.layout.coords;
  const int node = rank < static_cast<int>(coords.size())
                       ? coords[rank].node
                       : rank / std::max(plan.layout.gpus_per_node, 1);
  return plan.scenario.cluster.domain_of_node(node);
}

[[noreturn]] void lacks_end(int transfer, const std::string& of, bool send) {
  throw RuntimeError("plan: transfer " + std::to_string(transfer) + of + " lacks its " +
                     (send ? "send" : "recv"));
}

// The stream edges of the built ranks: each op waits for the previous op on its stream. With
// serial collectives (a backend that runs a rank's collectives one at a time in issue order,
// like our Gloo communicator) the gather and collective streams form one queue. p2p ops are
// posted as their deps finish, unserialised.
template <typename Fn>
void for_stream_edges(const plan::StepPlan& plan, const std::vector<int>& built, bool serial,
                      Fn&& fn) {
  std::vector<plan::OpId> merged;
  for (int r : built) {
    for (int s = 0; s < plan::kStreamCount; ++s) {
      const auto stream = static_cast<plan::Stream>(s);
      if (stream == plan::Stream::p2p) continue;
      if (serial && stream == plan::Stream::gather) continue;
      const auto& list = plan.ranks[r].streams[s];
      if (serial && stream == plan::Stream::collective) {
        const auto& g = plan.ranks[r].streams[static_cast<int>(plan::Stream::gather)];
        merged.clear();
        std::merge(list.begin(), list.end(), g.begin(), g.end(), std::back_inserter(merged));
        for (std::size_t k = 1; k < merged.size(); ++k) fn(merged[k - 1], merged[k]);
        continue;
      }
      for (std::size_t k = 1; k < list.size(); ++k) fn(list[k - 1], list[k]);
    }
  }
}

}  // namespace

PlanIndex::PlanIndex(const plan::StepPlan& plan, const CostModels& models) {
  const auto& all = plan.ops;
  const std::size_t n = all.size();
  instances = static_cast<int>(plan.collectives.size());
  ops.resize(n);
  pending.assign(n, 0);
  std::vector<std::uint32_t> succ_count(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const plan::Op& op = all[i];
    if (op.id != static_cast<plan::OpId>(i)) {
      throw RuntimeError("plan: op at index " + std::to_string(i) + " has id " +
                         std::to_string(op.id) + " (ids must equal their index)");
    }
    OpInfo& info = ops[i];
    info.rank = op.rank;
    info.mem_begin = op.mem_begin;
    info.mem_count = op.mem_count;
    info.category = static_cast<Category>(op.payload.index());
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
      info.duration_s = models.compute->duration(*c);
      info.on_host = c->on_host;
    } else if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
      if (c->instance < 0 || c->instance >= instances) {
        throw RuntimeError("plan: collective op " + std::to_string(i) + " names instance " +
                           std::to_string(c->instance) + " of " + std::to_string(instances));
      }
      info.activity = c->instance;
      info.comm_op = static_cast<std::uint8_t>(comm_op(c->kind));
    } else {
      const auto& p = std::get<plan::P2P>(op.payload);
      const auto& t = plan.transfers.at(p.transfer);
      if (t.send == plan::kNoOp || t.recv == plan::kNoOp) {
        lacks_end(p.transfer, " of op " + std::to_string(i), t.send == plan::kNoOp);
      }
      info.activity = instances + p.transfer;
      info.comm_op = static_cast<std::uint8_t>(scenario::CommOp::sendrecv);
    }
    pending[i] = static_cast<std::int32_t>(op.dep_count);
    for (plan::OpId d : plan.deps_of(op)) ++succ_count[d];
  }

  std::vector<int> built;  // ranks with ops of their own (folded replicas have none)
  const int world = static_cast<int>(plan.ranks.size());
  for (int r = 0; r < world; ++r) {
    if (plan.ranks[r].built) built.push_back(r);
  }
  for_stream_edges(plan, built, models.serial_collectives, [&](plan::OpId prev, plan::OpId next) {
    ++succ_count[prev];
    ++pending[next];
  });
  succ_begin_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] = succ_begin_[i] + succ_count[i];
  succ_.resize(succ_begin_[n]);
  std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (plan::OpId d : plan.deps_of(all[i])) succ_[fill[d]++] = static_cast<plan::OpId>(i);
  }
  for_stream_edges(plan, built, models.serial_collectives,
                   [&](plan::OpId prev, plan::OpId next) { succ_[fill[prev]++] = next; });

  // Activities: each instance's ops (checked against the ops), then each transfer's two ends.
  member_begin.reserve(plan.collectives.size() + plan.transfers.size() + 1);
  member_begin.push_back(0);
  activity.reserve(plan.collectives.size() + plan.transfers.size());
  for (int c = 0; c < instances; ++c) {
    const plan::CollectiveInstance& inst = plan.collectives[c];
    activity.push_back({inst.bytes, inst.group, inst.kind, false});
    for (plan::OpId id : plan.collectives[c].ops) {
      // Checked on the compact per-op records (the plan's ops are 160 bytes apart).
      if (id < 0 || static_cast<std::size_t>(id) >= n || ops[id].category != Category::collective ||
          ops[id].activity != c) {
        throw RuntimeError("plan: collective instance " + std::to_string(c) + " lists op " +
                           std::to_string(id) + " which is not one of its collectives");
      }
      members_.push_back(id);
    }
    member_begin.push_back(static_cast<std::uint32_t>(members_.size()));
  }
  for (std::size_t k = 0; k < plan.transfers.size(); ++k) {
    const plan::Transfer& t = plan.transfers[k];
    for (const bool send : {true, false}) {
      const plan::OpId end = send ? t.send : t.recv;
      if (end < 0 || static_cast<std::size_t>(end) >= n) lacks_end(static_cast<int>(k), "", send);
    }
    ActivityInfo a;
    a.bytes = t.bytes;
    a.gather = t.gather;
    a.same_domain = domain_of(plan, all[t.send].rank) == domain_of(plan, all[t.recv].rank);
    activity.push_back(a);
    members_.push_back(t.send);
    members_.push_back(t.recv);
    member_begin.push_back(static_cast<std::uint32_t>(members_.size()));
  }

  group_shape.resize(plan.groups.size());
  std::vector<int> per_node(static_cast<std::size_t>(std::max(plan.layout.nodes, 1)), 0);
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    GroupShape shape;
    shape.size = static_cast<int>(plan.groups[g].ranks.size());
    shape.nodes = 0;
    shape.per_node = 0;
    for (int r : plan.groups[g].ranks) {
      const int node = domain_of(plan, r);
      if (node >= static_cast<int>(per_node.size())) per_node.resize(node + 1, 0);
      if (per_node[node]++ == 0) ++shape.nodes;
      shape.per_node = std::max(shape.per_node, per_node[node]);
    }
    for (int r : plan.groups[g].ranks) per_node[domain_of(plan, r)] = 0;
    group_shape[g] = shape;
  }
}

}  // namespace stratagem::sim
