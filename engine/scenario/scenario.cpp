#include "engine/scenario/scenario.hpp"

#include <algorithm>
#include <filesystem>

#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/strategy_rewrite.hpp"

namespace stratagem::scenario {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

namespace {

// The cross-field rules validate() checks besides the model's simulated features.
void validate_rules(Scenario& s);

Scenario parse(const nlohmann::json& object, const std::string& source, bool to_simulate) {
  ObjectReader r(object, "");
  Scenario s;
  s.source = source;
  r.allow_text({"description", "$schema"});
  s.name = r.string_or("name", source.empty() ? "scenario" : source);
  for (const char* key : {"model", "cluster", "strategy"}) {
    if (!r.has(key)) throw SpecError(key, "missing required key");
  }
  s.model = parse_model(resolve_preset(PresetKind::model, *r.find("model"), "model"), "model");
  s.cluster =
      parse_cluster(resolve_preset(PresetKind::cluster, *r.find("cluster"), "cluster"), "cluster");
  s.strategy = parse_strategy(*r.find("strategy"), "strategy");
  if (const nlohmann::json* training = r.find("training")) {
    ObjectReader t(*training, "training");
    s.training.seq_len = t.integer_or("seq_len", 1024, 1, std::int64_t{1} << 32);
    s.training.global_batch = t.integer_or("global_batch", 0, 1, std::int64_t{1} << 40);
    s.training.steps = static_cast<int>(t.integer_or("steps", 1, 1, 1 << 30));
    s.training.seed = static_cast<std::uint64_t>(t.integer_or("seed", 1234, 0, INT64_MAX));
    t.finish();
  }
  r.finish();
  if (to_simulate) {
    validate(s);
  } else {
    validate_rules(s);
  }
  // `prefetch` paces the gathers of sharded parameters (ZeRO-3, FSDP): without them it does
  // nothing (#44 item 2).
  if (object.at("strategy").is_object() && object.at("strategy").contains("prefetch") &&
      !shards_parameters(s.strategy.sharding)) {
    s.warnings.push_back("strategy.prefetch: no effect with sharding '" +
                         std::string(to_string(s.strategy.sharding)) +
                         "' (it paces the parameter gathers of zero3 and FSDP's FULL_SHARD, "
                         "SHARD_GRAD_OP and HYBRID_SHARD)");
  }
  return s;
}

Scenario load(const std::string& file_or_name, bool to_simulate) {
  std::error_code ec;
  if (std::filesystem::exists(file_or_name, ec)) {
    return parse(read_json_file(file_or_name), file_or_name, to_simulate);
  }
  const bool looks_like_path = file_or_name.find('/') != std::string::npos ||
                               file_or_name.find(".json") != std::string::npos;
  if (looks_like_path) throw SpecError(file_or_name, "no such file");
  const std::string text = shipped_scenario_text(file_or_name);
  return parse(parse_json_text(text, file_or_name + ".json"), file_or_name, to_simulate);
}

}  // namespace

Scenario parse_scenario(const nlohmann::json& object, const std::string& source) {
  return parse(object, source, true);
}

Scenario load_scenario(const std::string& file_or_name) {
  return load(file_or_name, true);
}

Scenario load_scenario_to_describe(const std::string& file_or_name) {
  return load(file_or_name, false);
}

Scenario parse_scenario_to_describe(const nlohmann::json& object, const std::string& source) {
  return parse(object, source, false);
}

void validate(Scenario& s) {
  if (const UnsimulatedFeature why = unsimulated_feature(s.model)) {
    throw SpecError(why.key, why.what);
  }
  validate_rules(s);
  if (const UnsimulatedFeature why = unsimulated_moe_strategy(s)) {
    throw SpecError(why.key, why.what);
  }
}

namespace {

void validate_rules(Scenario& s) {
  auto& st = s.strategy;
  validate_mesh(s);
  if (const StackRefusal why = stack_refusal(st, s.cluster.gpu)) {
    throw SpecError("strategy." + why.key, why.reason);
  }
  if (st.attention_kernel != AttentionKernel::fa2 &&
      !s.cluster.gpu.attention_kernels.count(to_string(st.attention_kernel))) {
    std::string have;
    for (const auto& [k, curves] : s.cluster.gpu.attention_kernels) {
      have += (have.empty() ? "" : ", ") + k;
    }
    throw SpecError("strategy.attention_kernel",
                    std::string(to_string(st.attention_kernel)) + " has no published figures for " +
                        s.cluster.gpu.name +
                        " in its preset (it has: " + (have.empty() ? "none" : have) +
                        "); add cluster.gpu.attention_kernels or use fa2");
  }
  if (st.pp > s.model.layers) {
    throw SpecError("strategy.pp", "pp = " + str(st.pp) + " exceeds the model's " +
                                       str(s.model.layers) + " layers");
  }
  if (splits_backward(st.schedule) && st.pp < 2) {
    throw SpecError("strategy.schedule",
                    std::string("the ") + to_string(st.schedule) + " schedule needs pp >= 2");
  }
  if (multi_chunk(st.schedule)) {
    if (st.pp < 2) throw SpecError("strategy.schedule", "the interleaved schedule needs pp >= 2");
    // Megatron divides the layers, with the embedding and loss where they count as layers.
    const std::int64_t layers = st.split_layers(s.model.layers);
    const std::string counted = layers == s.model.layers
                                    ? " layers"
                                    : " layer-equivalents (" + str(s.model.layers) + " blocks" +
                                          (st.embedding_as_layer ? " + embedding" : "") +
                                          (st.loss_as_layer ? " + loss" : "") + ")";
    if (layers % st.pp != 0 || (layers / st.pp) % st.chunks != 0) {
      throw SpecError(
          "strategy.chunks",
          "chunks = " + str(st.chunks) + " must divide the layers per stage (" + str(layers) +
              counted + " / pp " + str(st.pp) +
              (layers % st.pp ? ", which is not whole)" : " = " + str(layers / st.pp) + ")"));
    }
  }
  if ((st.embedding_as_layer || st.loss_as_layer) && st.pp < 2) {
    throw SpecError(st.embedding_as_layer ? "strategy.account_for_embedding_in_pipeline_split"
                                          : "strategy.account_for_loss_in_pipeline_split",
                    "counts in the pipeline split, which needs pp >= 2");
  }
  // Batch arithmetic: global_batch = micro_batch_size × grad_accum × dp; either of
  // global_batch and grad_accum may be left out and derived.
  const std::int64_t per_accum = std::int64_t{st.micro_batch_size} * st.dp;
  if (st.grad_accum == 0) {
    if (s.training.global_batch == 0) {
      st.grad_accum = 1;
    } else {
      const std::int64_t m =
          require_grad_accum(s.training.global_batch, st.micro_batch_size, st.dp);
      if (m > kMaxMicroBatches) {
        throw SpecError("training.global_batch",
                        str(s.training.global_batch) +
                            " / (micro_batch_size × dp = " + str(per_accum) + ") = " + str(m) +
                            " micro-batches per step, more than the " + str(kMaxMicroBatches) +
                            " a plan may hold; raise micro_batch_size or dp");
      }
      st.grad_accum = static_cast<int>(m);
    }
  }
  const std::int64_t implied = per_accum * st.grad_accum;
  if (s.training.global_batch == 0) s.training.global_batch = implied;
  if (s.training.global_batch != implied) {
    throw SpecError("training.global_batch",
                    str(s.training.global_batch) +
                        " ≠ micro_batch_size × grad_accum × dp = " + str(st.micro_batch_size) +
                        " × " + str(st.grad_accum) + " × " + str(st.dp) + " = " + str(implied));
  }
  if (st.schedule == Schedule::interleaved && st.grad_accum % st.pp != 0) {
    throw SpecError("strategy.grad_accum", "the interleaved schedule needs the micro-batches (" +
                                               str(st.grad_accum) + ") to be a multiple of pp (" +
                                               str(st.pp) + "), as in Megatron-LM");
  }
  if (st.schedule == Schedule::dualpipev && st.grad_accum < 2 * st.pp) {
    throw SpecError("strategy.grad_accum",
                    "the dualpipev schedule needs at least 2·pp = " + str(2 * st.pp) +
                        " micro-batches (one per virtual stage, as PyTorch's ScheduleDualPipeV), "
                        "got " +
                        str(st.grad_accum));
  }
  if (st.schedule == Schedule::interleaved_zb) {
    // PyTorch's ScheduleInterleavedZeroBubble: max(1, m / pp) rounds must divide m.
    const int rounds = std::max(1, st.grad_accum / st.pp);
    if (st.grad_accum % rounds != 0) {
      throw SpecError("strategy.grad_accum",
                      "the interleaved-zb schedule runs the micro-batches (" + str(st.grad_accum) +
                          ") in max(1, m / pp) = " + str(rounds) +
                          " rounds, which must divide them (as PyTorch's "
                          "ScheduleInterleavedZeroBubble)");
    }
  }
  if (st.pp > 1 && (shards_gradients(st.sharding))) {
    throw SpecError("strategy.sharding",
                    std::string(to_string(st.sharding)) +
                        " shards gradients, which pipeline parallelism cannot use: each stage "
                        "accumulates full gradients over its micro-batches (DeepSpeed allows "
                        "ZeRO-1 with pipelines only); use zero1 or none with pp > 1");
  }
  if (st.sharding == Sharding::fsdp_hybrid_shard) {
    if (s.cluster.nodes < 2) {
      throw SpecError("strategy.sharding",
                      "HYBRID_SHARD shards inside a node and replicates across nodes; it needs "
                      "nodes >= 2 (use FULL_SHARD on one node)");
    }
  }
  if (st.offload_optimizer == Offload::cpu && !optimizer_offload_allowed(st.sharding)) {
    throw SpecError("strategy.offload_optimizer",
                    "optimizer offload needs a sharded optimizer (ZeRO stage >= 1 or FSDP), as "
                    "in DeepSpeed");
  }
  if (s.model.positions == PositionKind::learned && s.model.max_positions > 0 &&
      s.training.seq_len > s.model.max_positions) {
    throw SpecError("training.seq_len", str(s.training.seq_len) +
                                            " exceeds the model's learned position table (" +
                                            str(s.model.max_positions) + ")");
  }
}

}  // namespace

namespace {

nlohmann::json to_json(const MeasuredUnit& u) {
  return {{"name", u.name},
          {"params", u.params},
          {"forward_flops", u.forward_flops},
          {"activation_bytes", u.activation_bytes}};
}

}  // namespace

nlohmann::json to_json(const ModelSpec& m) {
  if (m.measured) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& b : m.measured->blocks) blocks.push_back(to_json(b));
    return {{"name", m.name},
            {"hidden", m.hidden},
            {"measured",
             {{"source", m.measured->source},
              {"element_bytes", m.measured->element_bytes},
              {"boundary_bytes", m.measured->boundary_bytes},
              {"input", to_json(m.measured->input)},
              {"blocks", blocks},
              {"output", to_json(m.measured->output)}}}};
  }
  if (m.params_given > 0) {
    return {{"name", m.name},
            {"params", m.params_given},
            {"layers", m.layers},
            {"hidden", m.hidden},
            {"heads", m.heads}};
  }
  nlohmann::json j = {{"name", m.name},
                      {"kind", m.kind == ModelKind::encoder ? "encoder" : "decoder"},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"ffn_hidden", m.ffn_hidden},
                      {"vocab", m.vocab},
                      {"max_positions", m.max_positions},
                      {"type_vocab", m.type_vocab},
                      {"tied_embeddings", m.tied_embeddings},
                      {"bias", m.bias},
                      {"pooler", m.pooler},
                      {"mlp", m.mlp == MlpKind::swiglu ? "swiglu" : "gelu"},
                      {"norm", m.norm == NormKind::rmsnorm ? "rmsnorm" : "layernorm"},
                      {"positions", m.positions == PositionKind::rotary ? "rotary" : "learned"}};
  if (m.head_dim > 0) j["head_dim"] = m.head_dim;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.mla) j["mla"] = to_json(*m.mla);
  if (m.moe) {
    j["moe"] = to_json(*m.moe);
    // Every block an MoE block: no dense MLP width to restate (parse_model refuses one).
    if (m.moe->dense_layers == 0 && m.moe->layer_freq == 1) j.erase("ffn_hidden");
  }
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.sliding_window) {
    j["sliding_window"] = {{"tokens", m.sliding_window->tokens},
                           {"full_every", m.sliding_window->full_every}};
  }
  return j;
}

nlohmann::json to_json(const Scenario& s) {
  return {{"name", s.name},
          {"model", to_json(s.model)},
          {"cluster", to_json(s.cluster)},
          {"strategy", to_json(s.strategy)},
          {"training",
           {{"seq_len", s.training.seq_len},
            {"global_batch", s.training.global_batch},
            {"steps", s.training.steps},
            {"seed", s.training.seed}}}};
}

}  // namespace stratagem::scenario
