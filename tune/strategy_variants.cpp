#include "tune/strategy_variants.hpp"

#include <algorithm>

#include "engine/memory/memory.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/strategy_rewrite.hpp"

namespace stratagem::tune {

namespace {

// The pipeline depth pipeline variants use: the largest of 8, 4, 2 that divides the ranks
// (the world, or its tensor-parallel groups), fits the layers and leaves whole micro-batches for
// the global batch.
int pipeline_depth(const scenario::Scenario& s, int ranks) {
  for (int pp : {8, 4, 2}) {
    if (ranks % pp == 0 && pp <= s.model.layers) return pp;
  }
  return 1;
}

// The tensor-parallel degree the tp and 3d variants use: the largest divisor ≥ 2 of
// gpus_per_node that divides the heads, kv_heads and ffn_hidden (one TP group per node at
// most, as Megatron-LM runs it); 0 when there is none.
int tensor_parallel_degree(const scenario::Scenario& s) {
  for (int tp = s.cluster.gpus_per_node; tp >= 2; --tp) {
    if (s.cluster.gpus_per_node % tp == 0 &&
        !scenario::tensor_parallel_model_refusal(s.model, tp)) {
      return tp;
    }
  }
  return 0;
}

// The expert-parallel degree the MoE variants use: the largest divisor of the experts that divides
// a stage's `stage_ranks` and stays inside a node (the all-to-all over NVLink, as Megatron-
// Bridge's single-node EP recipes); SpecError for a dense model.
int expert_parallel_degree(const scenario::Scenario& s, int stage_ranks) {
  if (!s.model.moe) {
    throw SpecError("model.moe", "the moe variants need a mixture-of-experts model; '" +
                                     s.model.name + "' is dense");
  }
  for (int ep = std::min(stage_ranks, s.cluster.gpus_per_node); ep >= 1; --ep) {
    if (s.model.moe->experts % ep == 0 && stage_ranks % ep == 0) return ep;
  }
  return 1;
}

scenario::Scenario with(const scenario::Scenario& base, int dp, int pp, scenario::Schedule schedule,
                        scenario::Sharding sharding, int tp = 1, int cp = 1, int ep = 0) {
  scenario::Scenario s = base;
  auto& st = s.strategy;
  if (ep > 0) st.ep = ep;  // 0: the base's
  st.dp = dp;
  st.pp = pp;
  st.tp = tp;
  st.cp = cp;
  st.fp8_all_gather = st.fp8_all_gather && scenario::fp8_all_gather_allowed(st.precision, sharding);
  st.sequence_parallel = scenario::default_sequence_parallel(tp, s.training.seq_len);
  st.async_tp = st.async_tp && scenario::async_tp_allowed(st);
  st.schedule = schedule;
  st.chunks = scenario::multi_chunk(schedule) ? 2 : 1;
  st.sharding = sharding;
  st.offload_optimizer = scenario::Offload::none;
  // Keep the global batch: re-derive the micro-batches for the new data-parallel degree.
  st.grad_accum = static_cast<int>(
      scenario::require_grad_accum(s.training.global_batch, st.micro_batch_size, dp));
  s.name = base.name;
  scenario::validate(s);
  return s;
}

// torchtitan's long-context recipe: FSDP over dp × cp with ring attention. The degree is the
// smallest power of two (up to a node's GPUs) whose scenario fits in memory, else the largest
// that validates; the sequence must split into 2·cp chunks.
scenario::Scenario context_parallel(const scenario::Scenario& base, int world) {
  std::optional<scenario::Scenario> last;
  std::string why = "no context-parallel degree ≥ 2 divides the cluster and 2·cp the sequence";
  for (int cp = 2; cp <= std::min(world, base.cluster.gpus_per_node); cp *= 2) {
    if (world % cp != 0) continue;
    try {
      scenario::Scenario s = base;
      s.strategy.attention = scenario::Attention::flash;
      s = with(s, world / cp, 1, scenario::Schedule::one_f_one_b,
               scenario::Sharding::fsdp_full_shard, 1, cp);
      if (memory::estimate_memory(s).fits) return s;
      last = s;
    } catch (const SpecError& e) {
      why = e.what();
    }
  }
  if (!last) throw SpecError("strategy.cp", why);
  return *last;
}

}  // namespace

const std::vector<std::string>& variant_names() {
  static const std::vector<std::string> names = {
      "base",   "ddp",   "zero1",  "zero2",       "zero3",   "fsdp", "shard_grad_op",
      "hybrid", "gpipe", "1f1b",   "interleaved", "offload", "tp",   "3d",
      "cp",     "fp8",   "moe-ep", "moe-3d",      "zb-h1",   "zbv",  "dualpipev"};
  return names;
}

std::vector<std::string> default_variants() {
  return {"ddp", "zero1", "zero2", "zero3", "fsdp", "gpipe", "1f1b", "interleaved"};
}

std::vector<Variant> make_variants(const scenario::Scenario& base,
                                   const std::vector<std::string>& names) {
  std::vector<Variant> out;
  const int world = base.world_size();
  for (const auto& name : names) {
    const auto& known = variant_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string msg = "unknown strategy '" + name + "'";
      const std::string hint = scenario::closest(name, known);
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw SpecError("--strategies", msg + "; valid: " + list);
    }
    Variant v;
    v.name = name;
    try {
      using scenario::Schedule;
      using scenario::Sharding;
      const int pp = pipeline_depth(base, world);
      // Pipelines keep the base's optimizer sharding when a pipeline allows it (none/zero1).
      const Sharding pipe_sharding =
          base.strategy.sharding == Sharding::zero1 ? Sharding::zero1 : Sharding::none;
      if (name == "base") {
        v.scenario = base;
      } else if (name == "ddp") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::none);
      } else if (name == "zero1") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::zero1);
      } else if (name == "zero2") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::zero2);
      } else if (name == "zero3") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::zero3);
      } else if (name == "fsdp") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::fsdp_full_shard);
      } else if (name == "shard_grad_op") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::fsdp_shard_grad_op);
      } else if (name == "hybrid") {
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::fsdp_hybrid_shard);
      } else if (name == "offload") {
        auto s = with(base, world, 1, Schedule::one_f_one_b, Sharding::zero2);
        s.strategy.offload_optimizer = scenario::Offload::cpu;
        scenario::validate(s);
        v.scenario = s;
      } else if (name == "cp") {
        v.scenario = context_parallel(base, world);
      } else if (name == "fp8") {
        // The scenario as written with the blocks' linear layers in fp8 (Transformer Engine;
        // torchao's float8 all-gather where parameters are sharded).
        scenario::Scenario s = base;
        s.strategy.precision = scenario::Precision::fp8;
        s.strategy.loss_scale = {};
        s.strategy.tf32 = false;
        s.strategy.fp8_all_gather =
            scenario::fp8_all_gather_allowed(s.strategy.precision, s.strategy.sharding);
        scenario::validate(s);
        v.scenario = s;
      } else if (name == "moe-ep") {
        // Megatron-Core's MoE data parallelism: every rank a data-parallel replica of the dense
        // layers, the experts split over a node, the distributed optimizer.
        v.scenario = with(base, world, 1, Schedule::one_f_one_b, Sharding::zero1, 1, 1,
                          expert_parallel_degree(base, world));
      } else if (name == "moe-3d") {
        // tp 2 with sequence parallelism (Megatron requires it with ep) × a pipeline × ep inside
        // each stage's ranks, the distributed optimizer: Megatron-Bridge's large-MoE layout.
        const int tp = scenario::tensor_parallel_model_refusal(base.model, 2) ? 1 : 2;
        const int depth = pipeline_depth(base, world / tp);
        const int dp = world / tp / depth;
        v.scenario = with(base, dp, depth, Schedule::one_f_one_b, Sharding::zero1, tp, 1,
                          expert_parallel_degree(base, dp * tp));
      } else if (name == "tp" || name == "3d") {
        const int tp = tensor_parallel_degree(base);
        if (tp < 2) {
          throw SpecError("strategy.tp",
                          "no tensor-parallel degree ≥ 2 divides gpus_per_node and the model's "
                          "heads, kv_heads and ffn_hidden");
        }
        if (name == "tp") {
          v.scenario = with(base, world / tp, 1, Schedule::one_f_one_b, base.strategy.sharding, tp);
        } else {
          const int depth = pipeline_depth(base, world / tp);  // over the TP groups
          if (depth < 2) {
            throw SpecError("strategy.pp", "no pipeline depth ≥ 2 divides the " +
                                               std::to_string(world / tp) +
                                               " tensor-parallel groups");
          }
          v.scenario =
              with(base, world / tp / depth, depth, Schedule::one_f_one_b, pipe_sharding, tp);
        }
      } else {
        if (pp < 2) throw SpecError("strategy.pp", "no pipeline depth ≥ 2 divides the cluster");
        const Schedule schedule = name == "gpipe"       ? Schedule::gpipe
                                  : name == "1f1b"      ? Schedule::one_f_one_b
                                  : name == "zb-h1"     ? Schedule::zb_h1
                                  : name == "zbv"       ? Schedule::zbv
                                  : name == "dualpipev" ? Schedule::dualpipev
                                                        : Schedule::interleaved;
        v.scenario = with(base, world / pp, pp, schedule, pipe_sharding);
      }
    } catch (const SpecError& e) {
      v.error = e.what();
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace stratagem::tune
