#include "apps/info_described.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "apps/format.hpp"
#include "engine/scenario/expert_mesh.hpp"

namespace stratagem::cli {
namespace {

using scenario::ModelSpec;

struct BlockKindFigures {
  scenario::BlockKind kind;
  std::int64_t count = 0;
  scenario::BlockParamsBreakdown parts;
  double params = 0, active = 0, forward_flops = 0;
};

std::vector<BlockKindFigures> block_kinds(const scenario::Scenario& s) {
  std::vector<BlockKindFigures> out;
  for (auto k : {scenario::BlockKind::dense, scenario::BlockKind::moe}) {
    BlockKindFigures b;
    b.kind = k;
    b.count = scenario::block_count(s.model, k);
    if (b.count == 0) continue;
    b.parts = scenario::block_params_breakdown(s.model, k);
    b.params = b.parts.attention + b.parts.mlp + b.parts.norms + b.parts.router;
    b.active = b.parts.attention + b.parts.mlp_active + b.parts.norms + b.parts.router;
    b.forward_flops = scenario::block_forward_flops_per_token(s.model, s.training.seq_len, k);
    out.push_back(b);
  }
  return out;
}

// Nodes an expert-parallel group of `ranks` consecutive ranks covers (1: on NVLink).
int nodes_spanned(const scenario::Scenario& s, int ranks) {
  const int domain = s.cluster.domain_gpus();
  return ranks <= domain ? 1 : (ranks + domain - 1) / domain;
}

nlohmann::json expert_parallel_json(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  const scenario::ExpertMesh mesh = scenario::expert_mesh(st);
  const scenario::ExpertRankLoad load =
      scenario::expert_rank_load(s, scenario::compute_param_bytes(st.precision));
  return {{"ep", mesh.ep},
          {"etp", mesh.etp},
          {"edp", mesh.edp},
          {"dispatcher", scenario::to_string(st.moe_dispatcher)},
          {"load_imbalance", st.moe_load_imbalance},
          {"ep_group_nodes", nodes_spanned(s, mesh.ep * mesh.etp)},
          {"local_experts", load.local_experts},
          {"expert_params_per_rank_per_block", load.expert_params},
          {"tokens_per_rank", load.tokens},
          {"routed_tokens_per_rank", load.routed},
          {"dispatch_bytes_per_rank", load.dispatch_bytes},
          {"dispatch_bytes_off_rank", load.dispatch_bytes_off_rank},
          {"busiest_expert_gemm_rows", load.expert_gemm_rows}};
}

void print_expert_parallel(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  const scenario::MoeSpec& e = *s.model.moe;
  const scenario::ExpertMesh mesh = scenario::expert_mesh(st);
  const double elem = scenario::compute_param_bytes(st.precision);
  const scenario::ExpertRankLoad load = scenario::expert_rank_load(s, elem);
  const int nodes = nodes_spanned(s, mesh.ep * mesh.etp);
  std::printf(
      "\nExpert parallelism (Megatron-Core's layout: each stage's dp x cp x tp = %d ranks as "
      "etp %d x ep %d x edp %d)\n",
      mesh.ranks_per_stage(), mesh.etp, mesh.ep, mesh.edp);
  const std::string where = nodes == 1 ? "inside one node (NVLink)"
                                       : "across " + std::to_string(nodes) + " nodes (the network)";
  std::printf(
      "  an expert-parallel group: %d ranks %d apart, %s; expert gradients reduced over edp %d, "
      "dense ones over dp x cp %d\n",
      mesh.ep, mesh.etp, where.c_str(), mesh.edp, st.dp * st.cp);
  const std::string slice =
      mesh.etp > 1 ? ", each 1/" + std::to_string(mesh.etp) + " of its MLP" : std::string();
  std::printf("  per rank and MoE block: %lld of %lld routed experts%s = %s parameters\n",
              static_cast<long long>(load.local_experts), static_cast<long long>(e.experts),
              slice.c_str(), grouped(load.expert_params).c_str());
  std::printf(
      "  per rank, MoE block and micro-batch: %s tokens (s·b/cp%s), %s routed copies (x top "
      "%lld); the %s dispatch moves %s of %g-byte activations at the rank (%s over links), the "
      "combine "
      "the same back, both again in backward\n",
      grouped(load.tokens).c_str(), st.sequence_parallel ? "/tp" : "", grouped(load.routed).c_str(),
      static_cast<long long>(e.top_k), scenario::to_string(st.moe_dispatcher),
      bytes_text(load.dispatch_bytes).c_str(), elem,
      bytes_text(load.dispatch_bytes_off_rank).c_str());
  std::printf(
      "  the busiest local expert's GEMMs: %s rows (ep x etp x routed copies / experts x imbalance "
      "%g)\n",
      grouped(load.expert_gemm_rows).c_str(), st.moe_load_imbalance);
}

}  // namespace

nlohmann::json described_json(const scenario::Scenario& s,
                              const scenario::UnsimulatedFeature& why) {
  const ModelSpec& m = s.model;
  nlohmann::json blocks = nlohmann::json::array();
  for (const BlockKindFigures& b : block_kinds(s)) {
    blocks.push_back({{"kind", b.kind == scenario::BlockKind::moe ? "moe" : "dense"},
                      {"count", b.count},
                      {"params", b.params},
                      {"active_params", b.active},
                      {"attention", b.parts.attention},
                      {"mlp", b.parts.mlp},
                      {"mlp_active", b.parts.mlp_active},
                      {"norms", b.parts.norms},
                      {"router", b.parts.router},
                      {"forward_flops_per_token", b.forward_flops}});
  }
  const double embedding = scenario::embedding_params(m);
  return {{"name", s.name},
          {"model", scenario::to_json(m)},
          {"params", scenario::total_params(m)},
          {"active_params", scenario::active_params(m)},
          {"active_params_without_embedding", scenario::active_params(m) - embedding},
          {"mtp_params", scenario::mtp_params(m)},
          {"params_breakdown",
           {{"embedding", embedding}, {"head", scenario::head_params(m)}, {"blocks", blocks}}},
          {"seq_len", s.training.seq_len},
          {"blocks_attention_core_flops_per_token",
           scenario::blocks_attention_core_flops_per_token(m, s.training.seq_len)},
          {"attention_core_flops_per_token",
           scenario::attention_core_flops_per_token(m, s.training.seq_len)},
          {"matmul_params_per_token", scenario::matmul_params(m)},
          {"flops_per_token", scenario::training_flops_per_token(m, s.training.seq_len)},
          {"flops_per_step",
           scenario::training_flops_per_token(m, s.training.seq_len) * s.tokens_per_step()},
          {"expert_parallel", m.moe ? expert_parallel_json(s) : nlohmann::json()},
          {"not_simulated",
           why ? nlohmann::json{{"key", why.key}, {"reason", why.what}} : nlohmann::json()}};
}

void print_described(const scenario::Scenario& s, const scenario::UnsimulatedFeature& why) {
  const ModelSpec& m = s.model;
  const auto seq = s.training.seq_len;
  std::printf("Scenario %s\n", s.name.c_str());
  std::printf("  cluster %s: %d node(s) x %d %s; batch: global %lld sequences of %lld tokens\n\n",
              s.cluster.name.c_str(), s.cluster.nodes, s.cluster.gpus_per_node,
              s.cluster.gpu.name.c_str(), static_cast<long long>(s.training.global_batch),
              static_cast<long long>(seq));
  std::printf("Model %s (%s%s)\n", m.name.c_str(),
              m.kind == scenario::ModelKind::encoder ? "encoder" : "decoder",
              m.moe ? ", mixture of experts" : "");
  std::string attention;
  if (m.mla) {
    const scenario::MlaSpec& a = *m.mla;
    attention = "multi-head latent attention: q rank " +
                (a.q_lora_rank > 0 ? std::to_string(a.q_lora_rank) : std::string("none")) +
                ", kv rank " + std::to_string(a.kv_lora_rank) + ", q/k head " +
                std::to_string(a.qk_nope_head_dim) + " + " + std::to_string(a.qk_rope_head_dim) +
                " rotary, v head " + std::to_string(a.v_head_dim);
  } else {
    attention = "head dim " + std::to_string(scenario::attention_head_dim(m)) + ", " +
                std::to_string(m.kv_heads) + " KV heads" + (m.qk_norm ? ", q/k norms" : "") +
                (m.attention_sinks ? ", sinks" : "");
  }
  std::printf("  l = %lld layers, h = %lld hidden, a = %lld heads (%s), V = %lld vocab\n",
              static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
              static_cast<long long>(m.heads), attention.c_str(), static_cast<long long>(m.vocab));
  if (m.moe) {
    const scenario::MoeSpec& e = *m.moe;
    std::printf("  experts: %lld routed (top %lld, ffn %lld)", static_cast<long long>(e.experts),
                static_cast<long long>(e.top_k), static_cast<long long>(e.expert_ffn_hidden));
    if (e.shared_experts > 0) {
      std::printf(" + %lld shared (ffn %lld)", static_cast<long long>(e.shared_experts),
                  static_cast<long long>(e.shared_expert_ffn_hidden));
    }
    std::printf(
        ", router %s, %s\n", scenario::to_string(e.router),
        e.capacity_factor > 0 ? ("capacity factor " + sci(e.capacity_factor)).c_str() : "dropless");
  }
  if (m.mtp_layers > 0) {
    std::printf("  %lld multi-token prediction module(s)\n", static_cast<long long>(m.mtp_layers));
  }
  if (m.sliding_window) {
    const auto& w = *m.sliding_window;
    std::printf("  sliding-window attention over %lld tokens, %s\n",
                static_cast<long long>(w.tokens),
                w.full_every > 0 ? ("full attention in blocks i with i + 1 a multiple of " +
                                    std::to_string(w.full_every))
                                       .c_str()
                                 : "in every block");
  }
  std::printf("\nParameters %16s %16s\n", "all", "active per token");
  for (const BlockKindFigures& b : block_kinds(s)) {
    const char* name = b.kind == scenario::BlockKind::moe ? "MoE block" : "dense block";
    std::printf("  %-11s %16s %16s  x %lld\n", name, grouped(b.params).c_str(),
                grouped(b.active).c_str(), static_cast<long long>(b.count));
    std::printf("    attention %16s %16s\n", grouped(b.parts.attention).c_str(),
                grouped(b.parts.attention).c_str());
    std::printf("    mlp       %16s %16s  %s\n", grouped(b.parts.mlp).c_str(),
                grouped(b.parts.mlp_active).c_str(),
                b.kind == scenario::BlockKind::moe
                    ? "routed + shared experts; active: top_k + shared"
                    : (m.mlp == scenario::MlpKind::swiglu ? "3·h·f" : "2·h·f"));
    if (b.parts.router > 0) {
      std::printf("    router    %16s %16s  experts·h%s\n", grouped(b.parts.router).c_str(),
                  grouped(b.parts.router).c_str(),
                  m.moe && m.moe->router == scenario::RouterKind::sigmoid_bias
                      ? " + a balancing bias per expert"
                      : "");
    }
    std::printf("    norms     %16s %16s\n", grouped(b.parts.norms).c_str(),
                grouped(b.parts.norms).c_str());
  }
  const double embedding = scenario::embedding_params(m), head = scenario::head_params(m);
  const double total = scenario::total_params(m), active = scenario::active_params(m);
  std::printf("  embedding   %16s %16s\n", grouped(embedding).c_str(), grouped(embedding).c_str());
  std::printf("  head        %16s %16s\n", grouped(head).c_str(), grouped(head).c_str());
  std::printf("  total       %16s %16s  (%s, %s active)\n", grouped(total).c_str(),
              grouped(active).c_str(), sci(total).c_str(), sci(active).c_str());
  std::printf("  active without the input embedding %s (%s)\n", grouped(active - embedding).c_str(),
              sci(active - embedding).c_str());
  if (m.mtp_layers > 0) {
    std::printf("  MTP modules %16s  beyond the shared embedding and head, not in the total\n",
                grouped(scenario::mtp_params(m)).c_str());
  }
  if (m.moe) print_expert_parallel(s);
  const double flops = scenario::training_flops_per_token(m, seq);
  std::printf("\nFLOPs per token (training = 3 x forward, s = %lld)\n",
              static_cast<long long>(seq));
  const double cores =
      scenario::blocks_attention_core_flops_per_token(m, seq) +
      static_cast<double>(m.mtp_layers) * scenario::attention_core_flops_per_token(m, seq);
  std::printf("  6·N_active + 3·Σ attention cores = 6 x %s + 3 x %s = %s FLOP per token\n",
              grouped(scenario::matmul_params(m)).c_str(), sci(cores).c_str(), sci(flops).c_str());
  std::string spans = "2·s·a·(d_qk + d_v) per block";
  if (m.sliding_window) {
    spans += ", s → min(s, " + std::to_string(m.sliding_window->tokens) +
             ") in the sliding-window blocks";
  }
  if (m.mtp_layers > 0) spans += " and MTP module";
  std::printf(
      "  N_active = the weight matrices a token multiplies (%sLM head%s); attention core %s\n",
      m.moe ? "top_k routed + shared experts, router, " : "",
      m.mtp_layers > 0 ? ", each MTP module's projection, block and LM head" : "", spans.c_str());
  std::printf("  per step: x %s tokens = %s FLOP\n", grouped(s.tokens_per_step()).c_str(),
              sci(flops * s.tokens_per_step()).c_str());
  if (why) std::printf("\nNot simulated yet (%s): %s\n", why.key.c_str(), why.what.c_str());
}

}  // namespace stratagem::cli
