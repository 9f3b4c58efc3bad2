#include "engine/spec/parallel_dims.hpp"

#include "engine/spec/error.hpp"

namespace stratagem::spec {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

void must_divide(int tp, std::int64_t value, const std::string& what) {
  if (value % tp != 0) {
    throw SpecError("strategy.tp", "tp = " + str(tp) + " must divide the model's " + what + " (" +
                                       str(value) + ")");
  }
}

}  // namespace

void validate_mesh(const Scenario& s) {
  const auto& st = s.strategy;
  const auto& c = s.cluster;
  const std::int64_t gpus = std::int64_t{c.nodes} * c.gpus_per_node;
  const std::int64_t world = std::int64_t{st.dp} * st.tp * st.pp;
  if (world != gpus) {
    const std::string product =
        st.tp > 1 ? "dp × tp × pp = " + str(st.dp) + " × " + str(st.tp) + " × " + str(st.pp)
                  : "dp × pp = " + str(st.dp) + " × " + str(st.pp);
    throw SpecError("strategy.dp", product + " = " + str(world) + ", but the cluster has " +
                                       str(gpus) + " GPUs (" + str(c.nodes) + " nodes × " +
                                       str(c.gpus_per_node) + ")");
  }
  if (st.sequence_parallel && st.tp < 2) {
    throw SpecError("strategy.sequence_parallel",
                    "sequence parallelism splits the tensor-parallel group's sequence; it needs "
                    "tp >= 2");
  }
  if (st.tp == 1) return;
  const auto& m = s.model;
  if (m.measured || m.params_given > 0) {
    throw SpecError("strategy.tp", std::string("tensor parallelism needs the model's shape "
                                               "(heads, ffn_hidden, vocab); '") +
                                       m.name + "' is given as " +
                                       (m.measured ? "a measured model" : "a parameter count"));
  }
  must_divide(st.tp, m.heads, "attention heads");
  must_divide(st.tp, m.kv_heads, "kv_heads (each rank holds whole query groups)");
  must_divide(st.tp, m.ffn_hidden, "ffn_hidden");
  if (st.tp > c.gpus_per_node || c.gpus_per_node % st.tp != 0) {
    throw SpecError("strategy.tp",
                    "tp = " + str(st.tp) + " must divide gpus_per_node (" + str(c.gpus_per_node) +
                        "): a tensor-parallel group spanning nodes would run its two "
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

}  // namespace stratagem::spec
