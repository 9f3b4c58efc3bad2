#include "engine/scenario/parallel_dims.hpp"

#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/strategy_rewrite.hpp"

namespace stratagem::scenario {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

std::optional<SpecError> must_divide(int tp, std::int64_t value, const std::string& what) {
  if (value % tp == 0) return std::nullopt;
  return SpecError("strategy.tp", "tp = " + str(tp) + " must divide the model's " + what + " (" +
                                      str(value) + ")");
}

// Megatron-LM's context parallelism: the sequence in 2·cp chunks, rank i holding chunks i and
// 2·cp − 1 − i (causal load balance); with sequence parallelism each rank's s/cp tokens are
// split again over tp.
void validate_context_parallel(const Scenario& s) {
  const auto& st = s.strategy;
  if (st.cp == 1) return;
  const auto& m = s.model;
  if (m.measured || m.params_given > 0) {
    throw SpecError("strategy.cp", std::string("context parallelism needs the model's shape "
                                               "(heads, kv_heads, hidden); '") +
                                       m.name + "' is given as " +
                                       (m.measured ? "a measured model" : "a parameter count"));
  }
  const std::int64_t chunks = 2 * std::int64_t{st.cp};
  if (s.training.seq_len % chunks != 0) {
    throw SpecError("training.seq_len",
                    "context parallelism splits the sequence into 2 × cp = " + str(chunks) +
                        " chunks (causal load balancing, as Megatron-LM); seq_len " +
                        str(s.training.seq_len) + " is not a multiple");
  }
  if (st.sequence_parallel && (s.training.seq_len / st.cp) % st.tp != 0) {
    throw SpecError("training.seq_len", "with cp = " + str(st.cp) +
                                            " and sequence parallelism over tp = " + str(st.tp) +
                                            ", seq_len / cp = " + str(s.training.seq_len / st.cp) +
                                            " must be a multiple of tp");
  }
}

void validate_fp8(const Scenario& s) {
  if (s.strategy.precision != Precision::fp8) return;
  if (s.cluster.gpu.peak_fp8 <= 0) {
    throw SpecError("strategy.mixed_precision",
                    "fp8 needs fp8 tensor cores; the cluster's GPU '" + s.cluster.gpu.name +
                        "' has none (no peak_tflops.fp8: Hopper, Ada, Blackwell and MI300 do)");
  }
}

}  // namespace

std::optional<SpecError> tensor_parallel_model_refusal(const ModelSpec& m, int tp) {
  if (tp == 1) return std::nullopt;
  if (m.measured || m.params_given > 0) {
    return SpecError("strategy.tp", std::string("tensor parallelism needs the model's shape "
                                                "(heads, ffn_hidden, vocab); '") +
                                        m.name + "' is given as " +
                                        (m.measured ? "a measured model" : "a parameter count"));
  }
  if (auto e = must_divide(tp, m.heads, "attention heads")) return e;
  if (auto e = must_divide(tp, m.kv_heads, "kv_heads (each rank holds whole query groups)")) {
    return e;
  }
  return must_divide(tp, m.ffn_hidden, "ffn_hidden");
}

void validate_mesh(const Scenario& s) {
  const auto& st = s.strategy;
  const auto& c = s.cluster;
  const std::int64_t gpus = std::int64_t{c.nodes} * c.gpus_per_node;
  const std::int64_t world = std::int64_t{st.dp} * st.tp * st.pp * st.cp;
  if (world != gpus) {
    std::string names = "dp", values = str(st.dp);
    if (st.tp > 1) names += " × tp", values += " × " + str(st.tp);
    if (st.cp > 1) names += " × cp", values += " × " + str(st.cp);
    names += " × pp", values += " × " + str(st.pp);
    const std::string product = names + " = " + values;
    throw SpecError("strategy.dp", product + " = " + str(world) + ", but the cluster has " +
                                       str(gpus) + " GPUs (" + str(c.nodes) + " nodes × " +
                                       str(c.gpus_per_node) + ")");
  }
  if (st.sequence_parallel && !sequence_parallel_allowed(st.tp)) {
    throw SpecError("strategy.sequence_parallel",
                    "sequence parallelism splits the tensor-parallel group's sequence; it needs "
                    "tp >= 2");
  }
  validate_context_parallel(s);
  validate_expert_parallel(s);
  validate_fp8(s);
  if (st.tp == 1) return;
  if (auto refusal = tensor_parallel_model_refusal(s.model, st.tp)) throw *refusal;
  const int domain = c.domain_gpus();
  if (st.tp > domain || domain % st.tp != 0) {
    const std::string where = c.nvlink_domain_gpus > 0
                                  ? "the NVLink domain's " + str(domain) + " GPUs"
                                  : "gpus_per_node (" + str(c.gpus_per_node) + ")";
    throw SpecError("strategy.tp",
                    "tp = " + str(st.tp) + " must divide " + where +
                        ": a tensor-parallel group spanning nodes would run its two "
                        "all-reduces per block and direction over the inter-node links");
  }
  if (st.sequence_parallel && s.training.seq_len % st.tp != 0) {
    throw SpecError("training.seq_len",
                    "sequence parallelism splits the sequence over tp = " + str(st.tp) +
                        "; seq_len " + str(s.training.seq_len) + " is not a multiple");
  }
  if (st.sharding == Sharding::fsdp_hybrid_shard && c.gpus_per_node / st.tp < 2) {
    throw SpecError(
        "strategy.sharding",
        "HYBRID_SHARD shards over the data-parallel ranks inside a node; with tp = " + str(st.tp) +
            " on " + str(c.gpus_per_node) + " GPUs per node there is one (use FULL_SHARD or none)");
  }
}

}  // namespace stratagem::scenario
