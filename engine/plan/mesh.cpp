#include "engine/plan/mesh.hpp"

#include <unordered_map>

#include "engine/scenario/expert_mesh.hpp"
#include "engine/workload/stages.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::plan {

namespace {

void make_layout(BuildContext& ctx) {
  const scenario::Scenario& s = ctx.scenario;
  const auto& st = s.strategy;
  Layout& L = ctx.plan.layout;
  L.world = s.world_size();
  L.dp = st.dp;
  L.pp = st.pp;
  L.tp = st.tp;
  L.cp = st.cp;
  L.chunks = st.chunks;
  L.gpus_per_node = s.cluster.gpus_per_node;
  L.nodes = s.cluster.nodes;
  L.units = workload::make_units(s);
  L.stage_chunk_units = workload::split_stages(s.model.layers, st);
  L.coords.resize(L.world);
  const scenario::MeshShape mesh = L.mesh();
  for (int r = 0; r < L.world; ++r) {
    auto& c = L.coords[r];
    const scenario::MeshCoord m = mesh.coord_of(r);
    c.tp = m.tp;
    c.cp = m.cp;
    c.dp = m.dp;
    c.stage = m.stage;
    c.node = r / L.gpus_per_node;
    c.local_rank = r % L.gpus_per_node;
  }
}

std::string suffix(const Layout& L, int tp_index) {
  return L.tp > 1 ? ", tp " + std::to_string(tp_index) : "";
}

std::string cp_suffix(const Layout& L, int cp_index) {
  return L.cp > 1 ? ", cp " + std::to_string(cp_index) : "";
}

// Each group's members are computed once (O(world) in all, not once per member), and groups
// are added in the order a walk over the ranks first meets them, so their indices do not
// depend on how the members were found.
void make_groups(BuildContext& ctx) {
  const Layout& L = ctx.plan.layout;
  const auto& st = ctx.strategy();
  // world, dp per (stage, tp), tp per (stage, dp, cp), cp per (stage, dp, tp), tied per
  // (dp, tp, cp): reserved, as a million ranks have over a hundred thousand groups.
  const auto per_stage = static_cast<std::size_t>(L.world / st.pp);
  ctx.plan.groups.reserve(1 + static_cast<std::size_t>(st.pp) * st.tp +
                          (st.tp > 1 ? L.world / st.tp : 0) + (st.cp > 1 ? L.world / st.cp : 0) +
                          (st.pp > 1 ? per_stage : 0));
  std::vector<int> world(L.world);
  for (int r = 0; r < L.world; ++r) world[r] = r;
  ctx.world_group = ctx.add_group(std::move(world), "world");
  ctx.dp_group.assign(L.world, -1);
  ctx.shard_group.assign(L.world, -1);
  ctx.replica_group.assign(L.world, -1);
  ctx.tied_group.assign(L.world, -1);
  ctx.tp_group.assign(L.world, -1);
  ctx.cp_group.assign(L.world, -1);
  const bool hybrid = st.sharding == scenario::Sharding::fsdp_hybrid_shard;
  // Members by key: data-parallel peers of (stage, tp index); HYBRID_SHARD's shard (the
  // data-parallel peers on one node) and replica (those at one local rank) groups.
  const auto key = [](std::int64_t a, std::int64_t b, std::int64_t c) {
    return (a * 1'000'003 + b) * 1'000'003 + c;
  };
  std::unordered_map<std::int64_t, std::vector<int>> shard_members, replica_members;
  if (hybrid) {
    for (int r = 0; r < L.world; ++r) {
      const auto& c = L.coords[r];
      shard_members[key(c.stage, c.tp, c.node)].push_back(r);
      replica_members[key(c.stage, c.tp, c.local_rank)].push_back(r);
    }
  }
  std::vector<int> dp_index(static_cast<std::size_t>(st.pp) * st.tp, -1);
  std::vector<int> tp_index(static_cast<std::size_t>(st.pp) * st.dp * st.cp, -1);
  std::vector<int> cp_index(static_cast<std::size_t>(st.pp) * st.dp * st.tp, -1);
  std::unordered_map<std::int64_t, int> shard_index, replica_index;
  for (int r = 0; r < L.world; ++r) {
    const auto& c = L.coords[r];
    int& dp = dp_index[static_cast<std::size_t>(c.stage) * st.tp + c.tp];
    if (dp < 0) {
      std::vector<int> members;
      members.reserve(static_cast<std::size_t>(st.dp) * st.cp);
      for (int d = 0; d < st.dp; ++d) {
        for (int k = 0; k < st.cp; ++k) members.push_back(L.rank_of(c.stage, d, c.tp, k));
      }
      dp = ctx.add_group(std::move(members), std::string(st.cp > 1 ? "dp×cp" : "dp") +
                                                 "(stage " + std::to_string(c.stage) +
                                                 suffix(L, c.tp) + ")");
    }
    ctx.dp_group[r] = dp;
    if (hybrid) {
      // Shard inside the node, replicate across nodes.
      const auto sk = key(c.stage, c.tp, c.node), rk = key(c.stage, c.tp, c.local_rank);
      auto [s, fresh_shard] = shard_index.try_emplace(sk, -1);
      if (fresh_shard) {
        s->second = ctx.add_group(shard_members[sk], "shard(node " + std::to_string(c.node) + ")");
      }
      auto [q, fresh_replica] = replica_index.try_emplace(rk, -1);
      if (fresh_replica) {
        q->second = ctx.add_group(replica_members[rk],
                                  "replica(local " + std::to_string(c.local_rank) + ")");
      }
      ctx.shard_group[r] = s->second;
      ctx.replica_group[r] = q->second;
    } else {
      ctx.shard_group[r] = dp;
    }
    if (ctx.scenario.model.tied_embeddings && st.ends_apart() &&
        (c.stage == 0 || c.stage == st.pp - 1)) {
      ctx.tied_group[r] = ctx.add_group(
          {L.rank_of(0, c.dp, c.tp, c.cp), L.rank_of(st.pp - 1, c.dp, c.tp, c.cp)},
          "tied(dp " + std::to_string(c.dp) + suffix(L, c.tp) + cp_suffix(L, c.cp) + ")");
    }
    if (st.tp > 1) {
      int& tp = tp_index[(static_cast<std::size_t>(c.stage) * st.dp + c.dp) * st.cp + c.cp];
      if (tp < 0) {
        std::vector<int> members;
        for (int t = 0; t < st.tp; ++t) members.push_back(L.rank_of(c.stage, c.dp, t, c.cp));
        tp = ctx.add_group(std::move(members), "tp(stage " + std::to_string(c.stage) +
                                                   ", dp " + std::to_string(c.dp) +
                                                   cp_suffix(L, c.cp) + ")");
      }
      ctx.tp_group[r] = tp;
    }
    if (st.cp > 1) {
      int& cp = cp_index[(static_cast<std::size_t>(c.stage) * st.dp + c.dp) * st.tp + c.tp];
      if (cp < 0) {
        std::vector<int> members;
        for (int k = 0; k < st.cp; ++k) members.push_back(L.rank_of(c.stage, c.dp, c.tp, k));
        cp = ctx.add_group(std::move(members), "cp(stage " + std::to_string(c.stage) + ", dp " +
                                                   std::to_string(c.dp) + suffix(L, c.tp) + ")");
      }
      ctx.cp_group[r] = cp;
    }
  }
}

// An MoE model's expert groups (expert_mesh.hpp), each made once, in rank order.
void make_expert_groups(BuildContext& ctx) {
  const Layout& L = ctx.plan.layout;
  ctx.ep_group.assign(L.world, -1);
  ctx.etp_group.assign(L.world, -1);
  ctx.expert_group.assign(L.world, -1);
  ctx.edp_group.assign(L.world, -1);
  if (!ctx.scenario.model.moe) return;
  const scenario::ExpertMesh mesh = scenario::expert_mesh(ctx.strategy());
  auto label = [](const char* name, int stage, const char* a, int i, const char* b, int j) {
    std::string out =
        std::string(name) + "(stage " + std::to_string(stage) + ", " + a + " " + std::to_string(i);
    if (b) out += std::string(", ") + b + " " + std::to_string(j);
    return out + ")";
  };
  for (int r = 0; r < L.world; ++r) {
    const scenario::ExpertCoord c = mesh.coord_of(r);
    auto member = [&](int edp, int ep, int etp) { return mesh.rank_of({c.stage, edp, ep, etp}); };
    // Each group is made by its first member (index 0 along its axis).
    if (c.ep == 0 && mesh.ep > 1) {
      std::vector<int> ranks;
      for (int e = 0; e < mesh.ep; ++e) ranks.push_back(member(c.edp, e, c.etp));
      const int g = ctx.add_group(std::move(ranks), label("ep", c.stage, "edp", c.edp,
                                                          mesh.etp > 1 ? "etp" : nullptr, c.etp));
      for (int e = 0; e < mesh.ep; ++e) ctx.ep_group[member(c.edp, e, c.etp)] = g;
    }
    if (c.etp == 0 && mesh.etp > 1) {
      std::vector<int> ranks;
      for (int t = 0; t < mesh.etp; ++t) ranks.push_back(member(c.edp, c.ep, t));
      const int g =
          ctx.add_group(std::move(ranks), label("etp", c.stage, "edp", c.edp, "ep", c.ep));
      for (int t = 0; t < mesh.etp; ++t) ctx.etp_group[member(c.edp, c.ep, t)] = g;
    }
    if (c.ep == 0 && c.etp == 0 && mesh.ep > 1 && mesh.etp > 1) {
      std::vector<int> ranks;
      for (int e = 0; e < mesh.ep; ++e) {
        for (int t = 0; t < mesh.etp; ++t) ranks.push_back(member(c.edp, e, t));
      }
      const int g =
          ctx.add_group(std::move(ranks), label("ep×etp", c.stage, "edp", c.edp, nullptr, 0));
      for (int e = 0; e < mesh.ep; ++e) {
        for (int t = 0; t < mesh.etp; ++t) ctx.expert_group[member(c.edp, e, t)] = g;
      }
    }
    if (c.edp == 0) {
      std::vector<int> ranks;
      for (int d = 0; d < mesh.edp; ++d) ranks.push_back(member(d, c.ep, c.etp));
      const int g = ctx.add_group(std::move(ranks), label("edp", c.stage, "ep", c.ep,
                                                          mesh.etp > 1 ? "etp" : nullptr, c.etp));
      for (int d = 0; d < mesh.edp; ++d) ctx.edp_group[member(d, c.ep, c.etp)] = g;
    }
  }
  // With only one of ep and etp above 1 the allgather dispatcher's group is that one.
  if (mesh.etp == 1) ctx.expert_group = ctx.ep_group;
  if (mesh.ep == 1 && mesh.etp > 1) ctx.expert_group = ctx.etp_group;
}

}  // namespace

void build_mesh(BuildContext& ctx) {
  make_layout(ctx);
  make_groups(ctx);
  make_expert_groups(ctx);
  StepPlan& plan = ctx.plan;
  plan.ranks.resize(plan.layout.world);
  const bool fold = ctx.options.fold;
  for (int r = 0; r < plan.layout.world; ++r) {
    const auto& c = plan.layout.coords[r];
    plan.ranks[r].representative = plan.layout.rank_of(c.stage, 0, 0);
    plan.ranks[r].built = !fold || (c.dp == 0 && c.tp == 0 && c.cp == 0);
  }
  plan.folded = fold && (ctx.strategy().dp > 1 || ctx.strategy().tp > 1 || ctx.strategy().cp > 1);
}

}  // namespace stratagem::plan
