#include "engine/scenario/expert_mesh.hpp"

#include <algorithm>
#include <string>

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

ExpertMesh expert_mesh(const StrategySpec& st) {
  ExpertMesh m;
  m.etp = st.etp;
  m.ep = st.ep;
  m.edp = st.dp * st.cp * st.tp / (st.ep * st.etp);
  return m;
}

void validate_expert_parallel(const Scenario& s) {
  const StrategySpec& st = s.strategy;
  const ModelSpec& m = s.model;
  if (!m.moe) {
    const char* key = st.ep > 1                                      ? "ep"
                      : st.etp > 1                                   ? "etp"
                      : st.moe_dispatcher != MoeDispatcher::alltoall ? "moe_dispatcher"
                      : st.moe_load_imbalance != 1.0                 ? "moe_load_imbalance"
                                                                     : nullptr;
    if (key) {
      throw SpecError(std::string("strategy.") + key,
                      "expert parallelism needs a mixture-of-experts model (model.moe); '" +
                          m.name + "' is dense");
    }
    return;
  }
  const MoeSpec& e = *m.moe;
  if (e.experts % st.ep != 0) {
    throw SpecError("strategy.ep", "ep = " + str(st.ep) + " must divide the model's " +
                                       str(e.experts) +
                                       " routed experts (each rank holds whole "
                                       "experts)");
  }
  const std::int64_t stage_ranks = std::int64_t{st.dp} * st.cp * st.tp;
  const std::int64_t expert_ranks = std::int64_t{st.ep} * st.etp;
  if (stage_ranks % expert_ranks != 0) {
    throw SpecError("strategy.ep",
                    "ep × etp = " + str(st.ep) + " × " + str(st.etp) + " = " + str(expert_ranks) +
                        " must divide the ranks of a pipeline stage, dp × cp × tp = " + str(st.dp) +
                        " × " + str(st.cp) + " × " + str(st.tp) + " = " + str(stage_ranks) +
                        " (Megatron-Core carves the expert groups out of them)");
  }
  if (e.expert_ffn_hidden % st.etp != 0 ||
      (e.shared_experts > 0 && e.shared_expert_ffn_hidden % st.etp != 0)) {
    throw SpecError(
        "strategy.etp",
        "etp = " + str(st.etp) + " must divide the experts' MLP width (" +
            str(e.expert_ffn_hidden) +
            (e.shared_experts > 0 ? ", shared " + str(e.shared_expert_ffn_hidden) : std::string()) +
            ")");
  }
  const int domain = s.cluster.domain_gpus();
  if (st.etp > domain || domain % st.etp != 0) {
    throw SpecError("strategy.etp", "etp = " + str(st.etp) + " must divide the GPUs of a node (" +
                                        str(domain) +
                                        "): an expert's tensor-parallel group spanning nodes "
                                        "would run its collectives over the inter-node links");
  }
  if (st.tp > 1 && st.ep > 1 && !st.sequence_parallel) {
    throw SpecError("strategy.sequence_parallel",
                    "expert parallelism with tensor parallelism needs sequence parallelism, as "
                    "Megatron-LM requires: the MoE blocks route each TP rank's own tokens");
  }
  const double most = static_cast<double>(e.experts) / static_cast<double>(e.top_k);
  if (st.moe_load_imbalance > most) {
    throw SpecError("strategy.moe_load_imbalance",
                    "the busiest expert gets at most experts / top_k = " + std::to_string(most) +
                        " times the mean (every token on the same experts); got " +
                        std::to_string(st.moe_load_imbalance));
  }
}

UnsimulatedFeature unsimulated_moe_strategy(const Scenario& s) {
  const StrategySpec& st = s.strategy;
  if (!s.model.moe) return {};
  const std::string later = " on a mixture-of-experts model is not simulated yet";
  if (st.sharding != Sharding::none && st.sharding != Sharding::zero1) {
    return {"strategy.sharding",
            std::string("'") + to_string(st.sharding) + "'" + later +
                " (the routed experts' states would shard over the expert-data-parallel "
                "group); use 'none' or 'zero1' (Megatron's distributed optimizer)"};
  }
  if (st.tp > 1 && s.model.moe->shared_experts > 0) {
    return {"strategy.tp", "tensor parallelism with shared experts" + later +
                               " (their all-gather and reduce-scatter beside the dispatch); use "
                               "tp 1 with ep"};
  }
  if (st.recompute == Recompute::selective_op) {
    return {"strategy.recompute", "torchtitan's per-op recomputation (selective-op)" + later +
                                      "; use 'selective' or 'full'"};
  }
  return {};
}

ExpertRankLoad expert_rank_load(const Scenario& s, double e) {
  ExpertRankLoad out;
  const StrategySpec& st = s.strategy;
  const ModelSpec& m = s.model;
  if (!m.moe) return out;
  const MoeSpec& moe = *m.moe;
  out.local_experts = moe.experts / st.ep;
  out.expert_params = static_cast<double>(out.local_experts) * routed_expert_params(m) / st.etp;
  out.tokens = static_cast<double>(s.training.seq_len) / st.cp * st.micro_batch_size /
               (st.sequence_parallel ? st.tp : 1);
  out.routed = out.tokens * static_cast<double>(moe.top_k);
  const double row = static_cast<double>(m.hidden) * e;
  const double group = static_cast<double>(st.ep) * st.etp;
  if (st.moe_dispatcher == MoeDispatcher::alltoall) {
    out.dispatch_bytes = out.routed * row;
    out.dispatch_bytes_off_rank =
        out.routed * row * (static_cast<double>(st.ep - 1) / st.ep + (st.etp - 1));
  } else {
    out.dispatch_bytes = group * out.tokens * row;
    out.dispatch_bytes_off_rank = (group - 1) * out.tokens * row;
  }
  // An expert with a capacity drops the copies beyond capacity_factor × its balanced share.
  const double load = moe.capacity_factor > 0 ? std::min(st.moe_load_imbalance, moe.capacity_factor)
                                              : st.moe_load_imbalance;
  out.expert_gemm_rows = group * out.routed / static_cast<double>(moe.experts) * load;
  return out;
}

}  // namespace stratagem::scenario
