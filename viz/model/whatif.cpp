#include "viz/model/whatif.hpp"

#include "engine/scenario/error.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/strategy_rewrite.hpp"

namespace stratagem::viz {

WhatIf what_if_of(const scenario::Scenario& s) {
  WhatIf w;
  const auto& st = s.strategy;
  w.dp = st.dp;
  w.tp = st.tp;
  w.sequence_parallel = st.sequence_parallel;
  w.cp = st.cp;
  w.attention = st.attention;
  w.pp = st.pp;
  w.schedule = st.schedule;
  w.chunks = scenario::multi_chunk(st.schedule) ? st.chunks : 2;
  w.micro_batches = st.grad_accum;
  w.micro_batch_size = st.micro_batch_size;
  w.sharding = st.sharding;
  w.precision = st.precision;
  w.recompute = st.recompute;
  return w;
}

scenario::Scenario apply_what_if(const scenario::Scenario& base, const WhatIf& k) {
  nlohmann::json j = scenario::to_json(base);
  auto& st = j["strategy"];
  st["dp"] = k.dp;
  st["tp"] = k.tp;
  st["sequence_parallel"] = k.sequence_parallel && scenario::sequence_parallel_allowed(k.tp);
  st["cp"] = k.cp;
  st["attention"] = scenario::to_string(k.attention);
  st["pp"] = k.pp;
  st["schedule"] = scenario::to_string(k.schedule);
  if (k.schedule == scenario::Schedule::interleaved ||
      k.schedule == scenario::Schedule::interleaved_zb) {
    st["chunks"] = k.chunks;
  } else {
    st.erase("chunks");
  }
  st["grad_accum"] = k.micro_batches;
  st["micro_batch_size"] = k.micro_batch_size;
  st["sharding"] = scenario::to_string(k.sharding);
  st["mixed_precision"] = scenario::to_string(k.precision);
  st["recompute"] = scenario::to_string(k.recompute);
  if (k.precision != scenario::Precision::fp16) {
    for (const char* key :
         {"initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"}) {
      st.erase(key);
    }
  }
  if (!scenario::fp8_all_gather_allowed(k.precision, k.sharding)) st.erase("fp8_all_gather");
  if (k.precision != scenario::Precision::no) st.erase("tf32");
  // Offloading needs a sharded optimizer; keep it only where it is still allowed.
  if (!scenario::optimizer_offload_allowed(k.sharding)) st["offload_optimizer"] = "none";
  j["training"]["global_batch"] =
      scenario::global_batch_of(k.micro_batch_size, k.micro_batches, k.dp);

  auto& cluster = j["cluster"];
  int gpus_per_node = base.cluster.gpus_per_node;
  if (!k.cluster.empty()) {
    const auto& preset =
        scenario::preset(scenario::PresetKind::cluster, k.cluster, "cluster.preset");
    gpus_per_node = preset.value("gpus_per_node", gpus_per_node);
    cluster = nlohmann::json{{"preset", k.cluster}};
  }
  if (!k.gpu.empty()) cluster["gpu"] = k.gpu;
  const int world = world_of(k);
  int nodes = base.cluster.nodes;
  if (gpus_per_node > 0 && world >= gpus_per_node && world % gpus_per_node == 0) {
    nodes = world / gpus_per_node;
  }
  cluster["nodes"] = nodes;
  return scenario::parse_scenario(j, base.source);
}

int world_of(const WhatIf& k) {
  return k.dp * k.tp * k.cp * k.pp;
}

}  // namespace stratagem::viz

namespace stratagem::viz {

namespace {

template <typename E>
E parse_enum(const std::string& value, const std::string& path, std::initializer_list<E> all) {
  std::vector<std::string> names;
  for (E e : all) {
    if (value == scenario::to_string(e)) return e;
    names.push_back(scenario::to_string(e));
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw SpecError(path, "unknown value '" + value + "'; valid: " + list);
}

bool parse_bool(const std::string& value, const std::string& path) {
  if (value == "true" || value == "on" || value == "1") return true;
  if (value == "false" || value == "off" || value == "0") return false;
  throw SpecError(path, "expected true or false, got '" + value + "'");
}

int parse_int(const std::string& value, const std::string& path) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || v < 1)
    throw SpecError(path, "expected a positive integer, got '" + value + "'");
  return v;
}

}  // namespace

void set_knob(WhatIf& k, const std::string& key, const std::string& value) {
  const std::string path = "--what-if " + key;
  using scenario::Precision;
  using scenario::Recompute;
  using scenario::Schedule;
  if (key == "dp") {
    k.dp = parse_int(value, path);
  } else if (key == "tp") {
    k.tp = parse_int(value, path);
  } else if (key == "sequence_parallel") {
    k.sequence_parallel = parse_bool(value, path);
  } else if (key == "cp") {
    k.cp = parse_int(value, path);
  } else if (key == "attention") {
    k.attention = parse_enum(value, path, {scenario::Attention::flash, scenario::Attention::eager});
  } else if (key == "pp") {
    k.pp = parse_int(value, path);
  } else if (key == "chunks") {
    k.chunks = parse_int(value, path);
  } else if (key == "micro_batches" || key == "grad_accum") {
    k.micro_batches = parse_int(value, path);
  } else if (key == "micro_batch_size") {
    k.micro_batch_size = parse_int(value, path);
  } else if (key == "schedule") {
    k.schedule =
        parse_enum(value, path,
                   {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved, Schedule::zb_h1,
                    Schedule::interleaved_zb, Schedule::zbv, Schedule::dualpipev});
  } else if (key == "sharding") {
    k.sharding = scenario::parse_sharding(value, path);
  } else if (key == "precision" || key == "mixed_precision") {
    k.precision = parse_enum(value, path,
                             {Precision::no, Precision::fp16, Precision::bf16, Precision::fp8});
  } else if (key == "recompute") {
    k.recompute = parse_enum(
        value, path,
        {Recompute::none, Recompute::selective, Recompute::selective_op, Recompute::full});
  } else if (key == "gpu") {
    scenario::preset(scenario::PresetKind::gpu, value, path);  // throws for unknown names
    k.gpu = value;
  } else if (key == "cluster") {
    scenario::preset(scenario::PresetKind::cluster, value, path);
    k.cluster = value;
  } else {
    throw SpecError("--what-if",
                    "unknown knob '" + key +
                        "'; valid: dp, tp, sequence_parallel, cp, attention, pp, schedule, chunks, "
                        "micro_batches, micro_batch_size, sharding, precision, recompute, gpu, "
                        "cluster");
  }
}

void set_knobs(WhatIf& knobs, const std::string& assignments) {
  std::size_t pos = 0;
  while (pos <= assignments.size()) {
    const std::size_t comma = assignments.find(',', pos);
    const std::string item = assignments.substr(pos, comma - pos);
    if (!item.empty()) {
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos)
        throw SpecError("--what-if", "expected key=value, got '" + item + "'");
      set_knob(knobs, item.substr(0, eq), item.substr(eq + 1));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

}  // namespace stratagem::viz
