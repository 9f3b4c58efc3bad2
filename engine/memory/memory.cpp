#include "engine/memory/memory.hpp"

#include "engine/memory/transient.hpp"
#include "engine/plan/builder.hpp"
#include "engine/plan/plan.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/units.hpp"
#include "engine/workload/stages.hpp"
#include "engine/workload/units.hpp"
#include "engine/workload/weights.hpp"

namespace stratagem::memory {

namespace {

using plan::TensorClass;

void set(RankMemory& r, TensorClass c, double bytes) {
  r.bytes[static_cast<int>(c)] = bytes;
}

RankMemory stage_memory(const scenario::Scenario& s, const std::vector<plan::Unit>& units,
                        const std::vector<std::pair<int, int>>& chunks, int stage) {
  const scenario::StrategySpec& st = s.strategy;
  const double c = scenario::compute_param_bytes(st.precision);
  // With one data-parallel rank there is nothing to gather or reduce: the plan emits neither.
  const bool gather = scenario::shards_parameters(st.sharding) && st.dp * st.cp > 1;
  const bool buckets = scenario::shards_gradients(st.sharding) && st.dp * st.cp > 1;

  StageTransientInput input;
  input.schedule = st.schedule;
  input.pp = st.pp;
  input.stage = stage;
  input.chunks = st.chunks;
  input.microbatches = s.micro_batches();
  input.params_sharded = gather;
  input.reshard_after_forward = scenario::reshards_after_forward(st.sharding);
  input.prefetch = st.prefetch;
  input.grads_sharded = buckets;
  input.bucket_cap_bytes = units::bucket_mb_to_bytes(st.bucket_mb);
  input.recompute = scenario::effective_recompute(st) != scenario::Recompute::none;
  double stage_params = 0, expert_params = 0;
  for (const auto& [begin, end] : chunks) {
    auto& out = input.chunk_units.emplace_back();
    for (int u = begin; u < end; ++u) {
      const plan::Unit& unit = units[u];
      stage_params += unit.params;
      expert_params += unit.expert_params;
      UnitTransient t;
      t.act = unit.act_bytes;
      // Units that recompute something rebuild what recomputation dropped.
      t.recompute =
          input.recompute && unit.recompute_flops > 0 ? unit.full_act_bytes - unit.act_bytes : 0.0;
      t.gather = gather ? workload::gathered_bytes(st, unit) : 0.0;
      t.bucket = buckets ? c * unit.params : 0.0;
      out.push_back(t);
    }
  }
  const TransientPeak transient = stage_transient_peak(input);

  RankMemory r;
  r.stage = stage;
  r.rank = scenario::mesh_shape(st).rank_of(stage, 0);
  r.shards = shard_group_size(s);
  r.stage_params = stage_params;
  // MoE: the routed experts' states are sharded over the expert-data-parallel group
  // (expert_mesh.hpp), the rest over the data-parallel one.
  ModelStates states = model_states(stage_params - expert_params, r.shards, st);
  if (expert_params > 0) states.add(model_states(expert_params, scenario::expert_mesh(st).edp, st));
  set(r, TensorClass::params, states.params_bytes);
  set(r, TensorClass::grads, states.grads_bytes);
  set(r, TensorClass::optimizer, states.optimizer_bytes);
  set(r, TensorClass::master_weights, states.master_weights_bytes);
  set(r, TensorClass::loss_scale, states.loss_scale_bytes);
  set(r, TensorClass::fp8_weights, workload::fp8_resident_bytes(st, units, chunks));
  set(r, TensorClass::activations, transient.activations);
  set(r, TensorClass::gathered_params, transient.gathered_params);
  set(r, TensorClass::comm_buckets, transient.comm_buckets);
  r.host_bytes = states.host_bytes;
  r.model_states_bytes = states.gpu_bytes();
  r.max_in_flight = transient.max_in_flight;
  for (double b : r.bytes) r.peak_bytes += b;
  r.capacity_bytes = s.cluster.gpu.memory_bytes;
  r.fits = r.peak_bytes <= r.capacity_bytes;
  return r;
}

}  // namespace

MemoryReport estimate_memory(const scenario::Scenario& s) {
  const scenario::StrategySpec& st = s.strategy;
  // Each stage walks its schedule, one step per forward and backward item: bounded as the
  // planner bounds its plans (plan::kMaxPlanOps), so a scenario `sim` refuses at once is not
  // walked for a minute here (pp 65,536 × 65,536 micro-batches: 8.6e9 steps).
  const int per_microbatch = scenario::items_per_microbatch(st.schedule);
  const double items = static_cast<double>(st.pp) * st.chunks * per_microbatch * st.grad_accum;
  if (items > plan::kMaxPlanOps) {
    throw SpecError(
        "strategy.grad_accum",
        "the memory estimate would walk about " + std::to_string(static_cast<long long>(items)) +
            " schedule items (pp " + std::to_string(st.pp) + " stages x " +
            std::to_string(st.grad_accum) + " micro-batches x " + std::to_string(per_microbatch) +
            (st.chunks > 1 ? " x " + std::to_string(st.chunks) + " chunks" : "") +
            "), more than the " + std::to_string(static_cast<long long>(plan::kMaxPlanOps)) +
            " a plan holds; use fewer micro-batches (a larger micro_batch_size)");
  }
  const std::vector<plan::Unit> units = workload::make_units(s);
  const auto split = workload::split_stages(s.model.layers, st);
  MemoryReport report;
  report.scenario_name = s.name;
  report.gpu_name = s.cluster.gpu.name;
  report.capacity_bytes = s.cluster.gpu.memory_bytes;
  report.dp = st.dp;
  report.pp = st.pp;
  report.tp = st.tp;
  report.cp = st.cp;
  for (int stage = 0; stage < st.pp; ++stage) {
    report.stages.push_back(stage_memory(s, units, split[stage], stage));
    const RankMemory& r = report.stages.back();
    report.fits = report.fits && r.fits;
    if (r.peak_bytes > report.stages[report.worst_stage].peak_bytes) report.worst_stage = stage;
  }
  report.ranks = expand_to_ranks(report.stages, st.dp, st.tp, st.cp);
  return report;
}

std::vector<RankMemory> expand_to_ranks(const std::vector<RankMemory>& stages, int dp, int tp,
                                        int cp) {
  std::vector<RankMemory> out;
  out.reserve(stages.size() * static_cast<std::size_t>(dp) * static_cast<std::size_t>(tp) *
              static_cast<std::size_t>(cp));
  for (const RankMemory& stage : stages) {
    for (int d = 0; d < dp; ++d) {
      for (int k = 0; k < cp; ++k) {
        for (int t = 0; t < tp; ++t) {
          RankMemory r = stage;
          r.dp_index = d;
          r.tp_index = t;
          r.cp_index = k;
          r.rank = scenario::MeshShape{dp, 1, tp, cp}.rank_of(stage.stage, d, t, k);
          out.push_back(r);
        }
      }
    }
  }
  return out;
}

nlohmann::ordered_json to_json(const RankMemory& r) {
  // Built by assignment, not from initializer lists, which copy every nested value.
  nlohmann::ordered_json j;
  j["rank"] = r.rank;
  j["stage"] = r.stage;
  j["dp_index"] = r.dp_index;
  j["tp_index"] = r.tp_index;
  if (r.cp_index > 0) j["cp_index"] = r.cp_index;
  nlohmann::ordered_json& classes = j["classes"];
  for (int c = 0; c < plan::kTensorClassCount; ++c) {
    classes[plan::to_string(static_cast<TensorClass>(c))] = r.bytes[c];
  }
  j["host_bytes"] = r.host_bytes;
  j["model_states_bytes"] = r.model_states_bytes;
  j["peak_bytes"] = r.peak_bytes;
  j["capacity_bytes"] = r.capacity_bytes;
  j["headroom_bytes"] = r.headroom_bytes();
  j["fits"] = r.fits;
  j["stage_params"] = r.stage_params;
  j["shards"] = r.shards;
  j["max_microbatches_in_flight"] = r.max_in_flight;
  return j;
}

nlohmann::ordered_json to_json(const MemoryReport& report) {
  const RankMemory& worst = report.worst();
  nlohmann::ordered_json j;
  j["name"] = report.scenario_name;
  j["gpu"] = report.gpu_name;
  j["units"] = "bytes";
  j["capacity_bytes"] = report.capacity_bytes;
  j["fits"] = report.fits;
  j["max_peak_bytes"] = worst.peak_bytes;
  j["short_by_bytes"] = report.fits ? 0.0 : worst.peak_bytes - worst.capacity_bytes;
  nlohmann::ordered_json& ranks = j["ranks"] = nlohmann::ordered_json::array();
  for (const RankMemory& r : report.ranks) ranks.push_back(to_json(r));
  nlohmann::ordered_json& stages = j["stages"] = nlohmann::ordered_json::array();
  for (const RankMemory& r : report.stages) stages.push_back(to_json(r));
  return j;
}

}  // namespace stratagem::memory
