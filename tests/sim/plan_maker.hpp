#pragma once
// Hand-built step plans for simulator tests, and cost models with fixed, exact durations.
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/plan.hpp"
#include "engine/workload/schedule.hpp"
#include "sim/cost_models.hpp"

namespace stratagem::test {

/// A scenario to attach to hand-built plans (results need one): a small GPT on one GPU.
inline scenario::Scenario tiny_scenario() {
  nlohmann::json j = {
      {"name", "hand-built"},
      {"model",
       {{"layers", 4}, {"hidden", 256}, {"heads", 4}, {"vocab", 1000}, {"max_positions", 128}}},
      {"cluster",
       {{"gpus_per_node", 1},
        {"gpu", "a100-80gb"},
        {"intra_node", {{"bandwidth_GBps", 300}, {"latency_us", 3}}},
        {"inter_node", {{"bandwidth_GBps", 25}, {"latency_us", 5}}}}},
      {"strategy", {{"dp", 1}, {"pp", 1}, {"grad_accum", 4}}},
      {"training", {{"seq_len", 128}}}};
  return scenario::parse_scenario(j);
}

/// Appends ops to a StepPlan; deps and memory effects may be added after an op is created
/// and are packed into the plan's arrays by finish().
class PlanMaker {
 public:
  /// `world` ranks; rank r is on node r / gpus_per_node, stage r / dp, dp index r % dp.
  PlanMaker(int world, int gpus_per_node = 8, int dp = 1) {
    plan_.scenario = tiny_scenario();
    auto& l = plan_.layout;
    l.world = world;
    l.dp = dp;
    l.pp = world / dp;
    l.gpus_per_node = gpus_per_node;
    l.nodes = (world + gpus_per_node - 1) / gpus_per_node;
    for (int r = 0; r < world; ++r) {
      l.coords.push_back({r % dp, r / dp, r / gpus_per_node, r % gpus_per_node});
    }
    plan_.ranks.resize(world);
    for (int r = 0; r < world; ++r) {
      plan_.ranks[r].built = true;
      plan_.ranks[r].representative = r;
    }
  }

  plan::StepPlan& plan() { return plan_; }

  /// A compute op whose `flops` field holds its duration (see FlopsAsSeconds).
  plan::OpId compute(int rank, double seconds, plan::Phase phase = plan::Phase::forward,
                     int microbatch = 0, std::vector<plan::OpId> deps = {}, int chunk = 0) {
    plan::Compute c;
    c.phase = phase;
    c.stage = plan_.layout.coords[rank].stage;
    c.chunk = chunk;
    c.microbatch = microbatch;
    c.flops = seconds;
    return add(rank, plan::Stream::compute, c, std::move(deps));
  }

  int group(std::vector<int> ranks, std::string label = "g") {
    plan::Group g;
    g.ranks = std::move(ranks);
    g.label = std::move(label);
    std::vector<int> nodes;
    for (int r : g.ranks) nodes.push_back(plan_.layout.coords[r].node);
    std::sort(nodes.begin(), nodes.end());
    g.nodes_spanned = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
    g.intra_node = g.nodes_spanned == 1;
    plan_.groups.push_back(std::move(g));
    return static_cast<int>(plan_.groups.size()) - 1;
  }

  /// One collective instance over the *built* `members` of group `g`; deps per member.
  std::vector<plan::OpId> collective(int g, plan::CollectiveKind kind, double bytes,
                                     const std::vector<int>& members,
                                     std::vector<std::vector<plan::OpId>> deps = {},
                                     plan::Stream stream = plan::Stream::collective,
                                     plan::CommPurpose purpose = plan::CommPurpose::grad_sync) {
    plan::CollectiveInstance inst;
    inst.group = g;
    inst.kind = kind;
    inst.bytes = bytes;
    const int index = static_cast<int>(plan_.collectives.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      plan::Collective c;
      c.kind = kind;
      c.purpose = purpose;
      c.group = g;
      c.instance = index;
      c.bytes = bytes;
      inst.ops.push_back(
          add(members[i], stream, c, i < deps.size() ? deps[i] : std::vector<plan::OpId>{}));
    }
    plan_.collectives.push_back(std::move(inst));
    const auto& ops = plan_.collectives.back().ops;
    return std::vector<plan::OpId>(ops.begin(), ops.end());
  }

  /// A send on `src` and its recv on `dst`; returns {send, recv}.
  std::pair<plan::OpId, plan::OpId> p2p(int src, int dst, double bytes,
                                        std::vector<plan::OpId> send_deps = {},
                                        std::vector<plan::OpId> recv_deps = {},
                                        int microbatch = 0) {
    const int t = static_cast<int>(plan_.transfers.size());
    plan::P2P p;
    p.transfer = t;
    p.bytes = bytes;
    p.microbatch = microbatch;
    p.send = true;
    p.peer = dst;
    const plan::OpId s = add(src, plan::Stream::p2p, p, std::move(send_deps));
    p.send = false;
    p.peer = src;
    const plan::OpId r = add(dst, plan::Stream::p2p, p, std::move(recv_deps));
    plan_.transfers.push_back({s, r, src, dst, bytes});
    return {s, r};
  }

  void dep(plan::OpId op, plan::OpId on) { deps_[op].push_back(on); }
  void mem(plan::OpId op, plan::TensorClass cls, double bytes, bool at_end) {
    effects_[op].push_back({cls, bytes, at_end});
  }

  /// Packs deps and effects; returns the finished plan.
  plan::StepPlan& finish() {
    plan_.deps.clear();
    plan_.mem_effects.clear();
    for (auto& op : plan_.ops) {
      op.dep_begin = static_cast<std::uint32_t>(plan_.deps.size());
      for (plan::OpId d : deps_[op.id]) plan_.deps.push_back(d);
      op.dep_count = static_cast<std::uint32_t>(deps_[op.id].size());
      op.mem_begin = static_cast<std::uint32_t>(plan_.mem_effects.size());
      for (const auto& e : effects_[op.id]) plan_.mem_effects.push_back(e);
      op.mem_count = static_cast<std::uint32_t>(effects_[op.id].size());
    }
    return plan_;
  }

 private:
  plan::OpId add(int rank, plan::Stream stream, plan::Payload payload,
                 std::vector<plan::OpId> deps) {
    plan::Op op;
    op.id = static_cast<plan::OpId>(plan_.ops.size());
    op.rank = rank;
    op.stream = stream;
    op.payload = std::move(payload);
    plan_.ops.push_back(std::move(op));
    plan_.ranks[rank].streams[static_cast<int>(stream)].push_back(plan_.ops.back().id);
    deps_.push_back(std::move(deps));
    effects_.emplace_back();
    return plan_.ops.back().id;
  }

  plan::StepPlan plan_;
  std::vector<std::vector<plan::OpId>> deps_;
  std::vector<std::vector<plan::MemEffect>> effects_;
};

struct PipelineSpec {
  scenario::Schedule schedule = scenario::Schedule::one_f_one_b;
  int pp = 1, dp = 1, chunks = 1, microbatches = 1;
  /// Per stage; a chunk takes 1/chunks of it. Zero-bubble schedules: backward_s is the B
  /// (input-gradient) pass and weight_s the W pass.
  double forward_s = 1, backward_s = 2, weight_s = 1;
  double p2p_bytes = 0;
  double grad_bytes = 0;      ///< > 0: a data-parallel all-reduce per stage at the end
  double act_bytes = 0;       ///< activations a forward allocates and its backward (W) frees
  std::vector<int> built_dp;  ///< data-parallel indices built (empty: all)
};

/// A pipeline over `pp` stages of `dp` replicas in the schedule's order (workload::schedule_order),
/// with p2p between neighbouring virtual stages of one replica (workload::stage_chunk: looped, or
/// zbv's V). Rank = stage·dp + dp index.
inline void add_pipeline(PlanMaker& pm, const PipelineSpec& ps) {
  std::vector<int> built = ps.built_dp;
  if (built.empty()) {
    for (int d = 0; d < ps.dp; ++d) built.push_back(d);
  }
  auto& plan = pm.plan();
  const int vstages = ps.pp * ps.chunks;
  // op_of[rank][forward?][chunk][mb]: forwards, and backwards or B passes (W passes exchange
  // nothing).
  std::map<std::tuple<int, bool, int, int>, plan::OpId> op_of;
  std::map<int, plan::OpId> last_compute;
  for (int d : built) {
    for (int s = 0; s < ps.pp; ++s) {
      const int rank = s * ps.dp + d;
      for (const auto& item :
           workload::schedule_order(ps.schedule, ps.pp, s, ps.chunks, ps.microbatches)) {
        const bool weight = item.pass == workload::BackwardPass::weight;
        const double t = (item.forward ? ps.forward_s
                          : weight     ? ps.weight_s
                                       : ps.backward_s) /
                         ps.chunks;
        const plan::Phase phase = item.forward ? plan::Phase::forward
                                  : weight     ? plan::Phase::backward_weight
                                  : item.pass == workload::BackwardPass::input
                                      ? plan::Phase::backward_input
                                      : plan::Phase::backward;
        const plan::OpId id = pm.compute(rank, t, phase, item.microbatch, {}, item.chunk);
        if (ps.act_bytes > 0 && (item.forward || item.releases())) {
          pm.mem(id, plan::TensorClass::activations, item.forward ? ps.act_bytes : -ps.act_bytes,
                 true);
        }
        if (!weight) op_of[{rank, item.forward, item.chunk, item.microbatch}] = id;
        last_compute[rank] = id;
      }
    }
  }
  for (int d : built) {
    for (int s = 0; s < ps.pp; ++s) {
      const int rank = s * ps.dp + d;
      for (int c = 0; c < ps.chunks; ++c) {
        const int vs = workload::virtual_stage(ps.schedule, ps.pp, s, c);
        for (int mb = 0; mb < ps.microbatches; ++mb) {
          // A neighbour on the same rank (zbv's turn) is ordered by the rank's own schedule.
          if (vs + 1 < vstages) {  // activations forward
            const auto [ns, nc] = workload::stage_chunk(ps.schedule, ps.pp, vs + 1);
            const int nrank = ns * ps.dp + d;
            if (nrank != rank) {
              auto [snd, rcv] =
                  pm.p2p(rank, nrank, ps.p2p_bytes, {op_of[{rank, true, c, mb}]}, {}, mb);
              pm.dep(op_of[{nrank, true, nc, mb}], rcv);
            }
          }
          if (vs > 0) {  // gradients backward
            const auto [ps_, pc] = workload::stage_chunk(ps.schedule, ps.pp, vs - 1);
            const int prank = ps_ * ps.dp + d;
            if (prank != rank) {
              auto [snd, rcv] =
                  pm.p2p(rank, prank, ps.p2p_bytes, {op_of[{rank, false, c, mb}]}, {}, mb);
              pm.dep(op_of[{prank, false, pc, mb}], rcv);
            }
          }
        }
      }
    }
  }
  if (ps.grad_bytes > 0) {
    for (int s = 0; s < ps.pp; ++s) {
      std::vector<int> group;
      for (int d = 0; d < ps.dp; ++d) group.push_back(s * ps.dp + d);
      const int g = pm.group(group, "dp(stage " + std::to_string(s) + ")");
      std::vector<int> members;
      std::vector<std::vector<plan::OpId>> deps;
      for (int d : built) {
        members.push_back(s * ps.dp + d);
        deps.push_back({last_compute[s * ps.dp + d]});
      }
      pm.collective(g, plan::CollectiveKind::all_reduce, ps.grad_bytes, members, deps);
    }
  }
  if (built.size() < static_cast<std::size_t>(ps.dp)) {
    plan.folded = true;
    for (int r = 0; r < plan.layout.world; ++r) {
      const int d = r % ps.dp, s = r / ps.dp;
      const bool is_built = std::find(built.begin(), built.end(), d) != built.end();
      plan.ranks[r].built = is_built;
      plan.ranks[r].representative = is_built ? r : s * ps.dp + built.front();
    }
  }
}

/// Compute ops take exactly `flops` seconds.
class FlopsAsSeconds final : public sim::ComputeModel {
 public:
  units::Seconds duration(const plan::Compute& op) const override { return op.flops; }
};

/// Communication is free.
class FreeNetwork final : public sim::NetworkModel {
 public:
  sim::CommPhases collective(plan::CollectiveKind, const sim::GroupShape&,
                             units::Bytes) const override {
    return {};
  }
  sim::CommPhases p2p(bool, units::Bytes) const override { return {}; }
};

/// Fixed compute, and α-β links with the given bandwidths (bytes/s) and latencies.
inline sim::CostModels exact_models(double intra_bw, double intra_lat, double inter_bw,
                                    double inter_lat, sim::Algorithm algo = sim::Algorithm::ring) {
  sim::CostModels m;
  m.compute = std::make_shared<FlopsAsSeconds>();
  m.network = std::make_shared<sim::AlphaBetaNetwork>(
      scenario::LinkSpec{intra_bw, intra_lat}, scenario::LinkSpec{inter_bw, inter_lat}, algo);
  m.profile = "test";
  return m;
}

inline sim::CostModels free_comm_models() {
  sim::CostModels m;
  m.compute = std::make_shared<FlopsAsSeconds>();
  m.network = std::make_shared<FreeNetwork>();
  m.profile = "test";
  return m;
}

}  // namespace stratagem::test
