#include "engine/plan/mesh.hpp"

namespace stratagem::plan {

namespace {

void make_layout(BuildContext& ctx) {
  const spec::Scenario& s = ctx.scenario;
  const auto& st = s.strategy;
  Layout& L = ctx.plan.layout;
  L.world = s.world_size();
  L.dp = st.dp;
  L.pp = st.pp;
  L.tp = st.tp;
  L.chunks = st.chunks;
  L.gpus_per_node = s.cluster.gpus_per_node;
  L.nodes = s.cluster.nodes;
  L.units = make_units(s);
  L.stage_chunk_units = split_stages(static_cast<int>(s.model.layers), st.pp, st.chunks);
  L.coords.resize(L.world);
  for (int r = 0; r < L.world; ++r) {
    auto& c = L.coords[r];
    c.tp = r % st.tp;
    c.dp = (r / st.tp) % st.dp;
    c.stage = r / (st.tp * st.dp);
    c.node = r / L.gpus_per_node;
    c.local_rank = r % L.gpus_per_node;
  }
}

std::string suffix(const Layout& L, int tp_index) {
  return L.tp > 1 ? ", tp " + std::to_string(tp_index) : "";
}

void make_groups(BuildContext& ctx) {
  const Layout& L = ctx.plan.layout;
  const auto& st = ctx.strategy();
  std::vector<int> world(L.world);
  for (int r = 0; r < L.world; ++r) world[r] = r;
  ctx.world_group = ctx.add_group(world, "world");
  ctx.dp_group.assign(L.world, -1);
  ctx.shard_group.assign(L.world, -1);
  ctx.replica_group.assign(L.world, -1);
  ctx.tied_group.assign(L.world, -1);
  ctx.tp_group.assign(L.world, -1);
  for (int r = 0; r < L.world; ++r) {
    const auto& c = L.coords[r];
    std::vector<int> dp;
    for (int d = 0; d < st.dp; ++d) dp.push_back(L.rank_of(c.stage, d, c.tp));
    ctx.dp_group[r] =
        ctx.add_group(dp, "dp(stage " + std::to_string(c.stage) + suffix(L, c.tp) + ")");
    if (st.sharding == spec::Sharding::fsdp_hybrid_shard) {
      // Shard inside the node, replicate across nodes.
      std::vector<int> shard, replica;
      for (int q : dp) {
        if (L.coords[q].node == c.node) shard.push_back(q);
        if (L.coords[q].local_rank == c.local_rank) replica.push_back(q);
      }
      ctx.shard_group[r] = ctx.add_group(shard, "shard(node " + std::to_string(c.node) + ")");
      ctx.replica_group[r] =
          ctx.add_group(replica, "replica(local " + std::to_string(c.local_rank) + ")");
    } else {
      ctx.shard_group[r] = ctx.dp_group[r];
    }
    if (ctx.scenario.model.tied_embeddings && st.pp > 1 && (c.stage == 0 || c.stage == st.pp - 1)) {
      ctx.tied_group[r] =
          ctx.add_group({L.rank_of(0, c.dp, c.tp), L.rank_of(st.pp - 1, c.dp, c.tp)},
                        "tied(dp " + std::to_string(c.dp) + suffix(L, c.tp) + ")");
    }
    if (st.tp > 1) {
      std::vector<int> tp;
      for (int t = 0; t < st.tp; ++t) tp.push_back(L.rank_of(c.stage, c.dp, t));
      ctx.tp_group[r] = ctx.add_group(
          tp, "tp(stage " + std::to_string(c.stage) + ", dp " + std::to_string(c.dp) + ")");
    }
  }
}

}  // namespace

void build_mesh(BuildContext& ctx) {
  make_layout(ctx);
  make_groups(ctx);
  StepPlan& plan = ctx.plan;
  plan.ranks.resize(plan.layout.world);
  const bool fold = ctx.options.fold;
  for (int r = 0; r < plan.layout.world; ++r) {
    const auto& c = plan.layout.coords[r];
    plan.ranks[r].representative = plan.layout.rank_of(c.stage, 0, 0);
    plan.ranks[r].built = !fold || (c.dp == 0 && c.tp == 0);
  }
  plan.folded = fold && (ctx.strategy().dp > 1 || ctx.strategy().tp > 1);
}

}  // namespace stratagem::plan
