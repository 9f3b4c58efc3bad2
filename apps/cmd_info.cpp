// `stratagem info <scenario> [--json]`: what the scenario's model is and costs — its shape,
// parameters (total, per block, embedding, head), training FLOPs per token and activation
// bytes per layer per micro-batch, each with the formula it comes from (engine/scenario/model.hpp).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/info_described.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/scenario/tensor_shapes.hpp"
#include "engine/scenario/units.hpp"
#include "engine/workload/context_ring.hpp"

namespace stratagem::cli {
namespace {

using scenario::ModelSpec;

struct Figures {
  double total = 0, block = 0, embedding = 0, head = 0, matmul = 0;
  scenario::BlockParamsBreakdown parts;
  double flops = 0, flops_blocks = 0, flops_attention = 0, flops_recompute = 0;
  double element_bytes = 2, act_layer = 0, act_head = 0;
  // One tensor-parallel rank's share (tp > 1): Megatron's layout, padded vocabulary.
  double block_tp = 0, embedding_tp = 0, head_tp = 0;
  std::int64_t padded_vocab = 0;
};

Figures compute(const scenario::Scenario& s) {
  const ModelSpec& m = s.model;
  const auto seq = s.training.seq_len;
  const auto mbs = s.strategy.micro_batch_size;
  Figures f;
  f.total = scenario::total_params(m);
  f.block = scenario::block_params(m);
  f.parts = scenario::block_params_breakdown(m);
  f.embedding = scenario::embedding_params(m);
  f.head = scenario::head_params(m);
  f.matmul = scenario::matmul_params(m);
  f.flops = scenario::training_flops_per_token(m, seq);
  f.flops_attention = 12.0 * m.layers * static_cast<double>(m.hidden) * seq;
  // Recomputation repeats forward work in backward: a whole block's forward (full), or only
  // the attention core Q·Kᵀ and scores·V, 4·h·s per layer per token (selective).
  if (s.strategy.recompute == scenario::Recompute::full) {
    f.flops_recompute = m.layers * scenario::block_forward_flops_per_token(m, seq);
  } else if (scenario::effective_recompute(s.strategy) == scenario::Recompute::selective) {
    f.flops_recompute = 4.0 * m.layers * static_cast<double>(m.hidden) * seq;
  } else if (s.strategy.recompute == scenario::Recompute::selective_op) {
    // torchtitan's per-op policy: the linears it does not save (and eager attention's core).
    f.flops_recompute = m.layers * scenario::per_op_recompute_flops_per_token(m, 1);
    if (s.strategy.attention == scenario::Attention::eager)
      f.flops_recompute += 4.0 * m.layers * static_cast<double>(m.hidden) * seq;
  }
  f.element_bytes = scenario::compute_param_bytes(s.strategy.precision);
  const scenario::ActivationLayout layout{s.strategy.tp, s.strategy.sequence_parallel,
                                          s.strategy.cp,
                                          s.strategy.attention == scenario::Attention::flash,
                                          s.strategy.precision == scenario::Precision::fp8};
  f.act_layer = scenario::activation_bytes_per_layer(
      m, seq, mbs, scenario::effective_recompute(s.strategy), f.element_bytes, layout);
  f.act_head = scenario::head_activation_bytes(m, seq, mbs, f.element_bytes, layout);
  const int tp = s.strategy.tp;
  f.padded_vocab = scenario::padded_vocab(m, tp);
  if (!m.measured) {
    f.block_tp = scenario::block_params_tp(m, tp);
    f.embedding_tp = scenario::embedding_params_tp(m, tp);
    f.head_tp = scenario::head_params_tp(m, tp);
  }
  return f;
}

// The formula activation_bytes_per_layer evaluates (engine/scenario/model.hpp), written for this
// strategy: s' = s/cp under context parallelism, /t on what tensor (and sequence)
// parallelism splits, fp8 linear inputs, and the attention kernel's own term.
std::string activation_formula(const scenario::StrategySpec& st) {
  const scenario::Recompute r = scenario::effective_recompute(st);
  const bool tp = st.tp > 1, sp = st.sequence_parallel;
  const bool fp8 = st.precision == scenario::Precision::fp8;
  const std::string sl = st.cp > 1 ? "(s/cp)" : "s";
  const std::string sbh = sl + "·b·h";
  if (r == scenario::Recompute::full) {
    return "2·" + sbh + (sp ? "/t" : "") + " (full recomputation: the layer input only)";
  }
  if (r == scenario::Recompute::selective_op) {
    return "torchtitan's per-op checkpointing: the layer input + the outputs of every other "
           "linear (wq, wv, w1, w2 / fc1) + the attention output and log-sum-exp" +
           std::string(sp ? " + the two reduce-scatter outputs" : "") +
           " (linears with a bias run as addmm, not saved)";
  }
  std::string f;
  if (!tp) {
    f = (fp8 ? "27·" : "34·") + sbh;
  } else if (sp) {
    f = (fp8 ? "27·" : "34·") + sbh + "/t";
  } else {
    f = sbh + (fp8 ? "·(8 + 19/t)" : "·(10 + 24/t)");
  }
  const std::string t = tp ? "/t" : "";
  std::string why = tp ? (sp ? "tensor + sequence parallel" : "tensor parallel") : "";
  auto add_why = [&](const std::string& w) { why += (why.empty() ? "" : ", ") + w; };
  if (fp8) add_why("linear inputs in fp8");
  if (r == scenario::Recompute::selective) {
    add_why("selective recomputation");
  } else if (st.attention == scenario::Attention::flash) {
    f += " + 4·a·" + sl + "·b" + t;
    add_why("flash attention: + the fp32 log-sum-exp per head and row");
  } else {
    f += " + 5·a·s²·b" + t;
    add_why("eager attention: + the s×s scores, mask and dropout");
  }
  return f + (why.empty() ? "" : " (" + why + ")");
}

nlohmann::json to_json(const scenario::Scenario& s, const Figures& f) {
  const auto& m = s.model;
  return {{"name", s.name},
          {"model", scenario::to_json(m)},
          {"params", f.total},
          {"params_breakdown",
           {{"embedding", f.embedding},
            {"per_block", f.block},
            {"per_block_attention", f.parts.attention},
            {"per_block_mlp", f.parts.mlp},
            {"per_block_norms", f.parts.norms},
            {"blocks", f.block * m.layers},
            {"head", f.head},
            {"matmul", f.matmul}}},
          {"seq_len", s.training.seq_len},
          {"micro_batch_size", s.strategy.micro_batch_size},
          {"attention", scenario::to_string(s.strategy.attention)},
          {"cp", s.strategy.cp},
          {"flops_per_token", f.flops},
          {"flops_formula", "6·N_matmul + 12·l·h·s"},
          {"recompute_flops_per_token", f.flops_recompute},
          {"flops_per_step", (f.flops + f.flops_recompute) * s.tokens_per_step()},
          {"recompute", scenario::to_string(s.strategy.recompute)},
          {"activation_element_bytes", f.element_bytes},
          {"activation_bytes_per_layer", f.act_layer},
          {"activation_formula", activation_formula(s.strategy)},
          {"head_activation_bytes", f.act_head},
          {"tp", s.strategy.tp},
          {"sequence_parallel", s.strategy.sequence_parallel},
          {"padded_vocab", f.padded_vocab},
          {"params_per_tp_rank",
           {{"embedding", f.embedding_tp}, {"per_block", f.block_tp}, {"head", f.head_tp}}}};
}

// A measured model (export_scenario): its units as measured, per sample and per micro-batch.
void print_measured(const scenario::Scenario& s, const Figures& f) {
  const auto& mm = *s.model.measured;
  const double b = s.strategy.micro_batch_size;
  const double scale = f.element_bytes / mm.element_bytes;
  std::printf("Model %s (measured: %zu blocks between an input and an output unit)\n",
              s.model.name.c_str(), mm.blocks.size());
  if (!mm.source.empty()) std::printf("  %s\n", mm.source.c_str());
  std::printf("\n  %-24s %12s %16s %20s\n", "unit", "params", "fwd FLOP/sample",
              "activations/micro-batch");
  auto row = [&](const scenario::MeasuredUnit& u) {
    std::printf("  %-24s %12s %16s %20s\n", u.name.c_str(), grouped(u.params).c_str(),
                grouped(u.forward_flops).c_str(),
                bytes_text(u.activation_bytes * b * scale).c_str());
  };
  row(mm.input);
  for (const auto& u : mm.blocks) row(u);
  row(mm.output);
  std::printf(
      "\n  total %s parameters; training %s FLOP per sample (3 x forward); a block's "
      "output %s per sample (%g-byte elements as measured, %g in this scenario)\n",
      grouped(f.total).c_str(), sci(f.flops * s.training.seq_len).c_str(),
      bytes_text(mm.boundary_bytes).c_str(), mm.element_bytes, f.element_bytes);
}

void print_report(const scenario::Scenario& s, const Figures& f) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  const double l = static_cast<double>(m.layers);
  std::printf("Scenario %s\n", s.name.c_str());
  const std::string tp_text =
      (st.tp > 1 ? " x tp " + std::to_string(st.tp) +
                       (st.sequence_parallel ? " (sequence parallel)" : "")
                 : std::string()) +
      (st.cp > 1 ? " x cp " + std::to_string(st.cp) : std::string());
  std::printf("  cluster %s: %d node(s) x %d %s; dp %d%s x pp %d, sharding %s, precision %s\n",
              s.cluster.name.c_str(), s.cluster.nodes, s.cluster.gpus_per_node,
              s.cluster.gpu.name.c_str(), st.dp, tp_text.c_str(), st.pp,
              scenario::to_string(st.sharding), scenario::to_string(st.precision));
  std::printf(
      "  batch: micro-batch %d x %d accumulation x dp %d = global %lld sequences of %lld "
      "tokens\n\n",
      st.micro_batch_size, st.grad_accum, st.dp, static_cast<long long>(s.training.global_batch),
      static_cast<long long>(s.training.seq_len));

  if (m.measured) {
    print_measured(s, f);
    return;
  }
  std::printf("Model %s (%s)\n", m.name.c_str(),
              m.kind == scenario::ModelKind::encoder ? "encoder" : "decoder");
  std::printf(
      "  l = %lld layers, h = %lld hidden, a = %lld heads (head dim %lld, %lld KV heads), "
      "f = %lld ffn (%s), V = %lld vocab\n",
      static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
      static_cast<long long>(m.heads), static_cast<long long>(m.hidden / m.heads),
      static_cast<long long>(m.kv_heads), static_cast<long long>(m.ffn_hidden),
      m.mlp == scenario::MlpKind::swiglu ? "SwiGLU" : "GELU", static_cast<long long>(m.vocab));
  if (m.params_given > 0) {
    std::printf(
        "  quick form: %s parameters given; hidden and heads estimated (h = sqrt(P/12l))\n\n",
        grouped(m.params_given).c_str());
  } else {
    std::printf(
        "  %s, %s positions%s, %s, %s embeddings%s\n\n",
        m.norm == scenario::NormKind::rmsnorm ? "RMSNorm" : "LayerNorm",
        m.positions == scenario::PositionKind::rotary ? "rotary" : "learned",
        m.positions == scenario::PositionKind::learned
            ? (" (" + std::to_string(m.max_positions) + ")").c_str()
            : "",
        m.bias ? "biases" : "no biases", m.tied_embeddings ? "tied" : "untied",
        m.type_vocab > 0 ? (", " + std::to_string(m.type_vocab) + " token types").c_str() : "");
  }

  std::printf("Parameters\n");
  std::printf("  total       %16s  (%s)\n", grouped(f.total).c_str(), sci(f.total).c_str());
  std::printf("  per block   %16s  x %lld layers = %s (%.1f%%)\n", grouped(f.block).c_str(),
              static_cast<long long>(m.layers), grouped(f.block * l).c_str(),
              f.total > 0 ? 100.0 * f.block * l / f.total : 0.0);
  if (m.params_given > 0) {
    std::printf("  (quick form: the parts, embedding and head included, are not known)\n\n");
  } else {
    std::printf("    attention %16s  q, o: 2h²; k, v: 2·h·h_kv%s\n",
                grouped(f.parts.attention).c_str(), m.bias ? "; biases" : "");
    std::printf("    mlp       %16s  %s%s\n", grouped(f.parts.mlp).c_str(),
                m.mlp == scenario::MlpKind::swiglu ? "3·h·f" : "2·h·f", m.bias ? " + biases" : "");
    std::printf("    norms     %16s  2 per block\n", grouped(f.parts.norms).c_str());
    std::printf("  embedding   %16s  V·h%s%s%s\n", grouped(f.embedding).c_str(),
                m.positions == scenario::PositionKind::learned ? " + positions·h" : "",
                m.type_vocab > 0 ? " + types·h" : "",
                m.kind == scenario::ModelKind::encoder ? " + norm" : "");
    std::string head_parts = m.kind == scenario::ModelKind::decoder ? "final norm" : "";
    if (!m.tied_embeddings) {
      head_parts += std::string(head_parts.empty() ? "" : " + ") + "LM head V·h";
    }
    if (m.pooler) head_parts += std::string(head_parts.empty() ? "" : " + ") + "pooler h²+h";
    if (m.tied_embeddings) head_parts += "; output layer tied to the token embedding";
    std::printf("  head        %16s  %s\n\n", grouped(f.head).c_str(), head_parts.c_str());
  }

  std::printf("FLOPs per token (training = forward + backward, s = %lld)\n",
              static_cast<long long>(s.training.seq_len));
  std::printf("  6·N_matmul + 12·l·h·s = 6 x %s + 12 x %lld x %lld x %lld\n",
              grouped(f.matmul).c_str(), static_cast<long long>(m.layers),
              static_cast<long long>(m.hidden), static_cast<long long>(s.training.seq_len));
  std::printf("    = %s + %s = %s FLOP per token\n", sci(6.0 * f.matmul).c_str(),
              sci(f.flops_attention).c_str(), sci(f.flops).c_str());
  std::printf(
      "  N_matmul = blocks' weight matrices + LM head V·h = %s (Korthikanti et al. 2022, "
      "eq. 7 / (B·s))\n",
      grouped(f.matmul).c_str());
  if (f.flops_recompute > 0) {
    std::printf("  %s recomputation adds %s per token (%s): %s with recomputation\n",
                scenario::to_string(st.recompute), sci(f.flops_recompute).c_str(),
                st.recompute == scenario::Recompute::full ? "one forward of the blocks"
                                                          : "4·l·h·s, the attention core",
                sci(f.flops + f.flops_recompute).c_str());
  }
  if (st.attention == scenario::Attention::flash && !m.measured) {
    std::printf(
        "  flash attention runs the core (12·l·h·s) as one fused kernel at the GPU's attention "
        "efficiency%s, its backward 2.5x its forward; MFU counts the full 12·l·h·s\n",
        m.kind == scenario::ModelKind::decoder ? ", skipping the causal mask's upper half" : "");
  }
  if (st.precision == scenario::Precision::fp8) {
    std::printf(
        "  fp8: the blocks' linear layers at the fp8 peak, attention and LM head in bf16; MFU "
        "divides by the bf16 peak\n");
  }
  std::printf("  per step: x %s tokens = %s FLOP\n\n", grouped(s.tokens_per_step()).c_str(),
              sci((f.flops + f.flops_recompute) * s.tokens_per_step()).c_str());

  std::printf(
      "Activations per layer per micro-batch (s = %lld, b = %d, h = %lld, a = %lld, %g-byte "
      "elements, recompute %s, %s attention)\n",
      static_cast<long long>(s.training.seq_len), st.micro_batch_size,
      static_cast<long long>(m.hidden), static_cast<long long>(m.heads), f.element_bytes,
      scenario::to_string(st.recompute), scenario::to_string(st.attention));
  std::string per_rank;
  if (st.tp > 1) per_rank += ", t = " + std::to_string(st.tp);
  if (st.cp > 1) per_rank += ", cp = " + std::to_string(st.cp);
  if (!per_rank.empty()) per_rank += ", per rank";
  const bool per_op = st.recompute == scenario::Recompute::selective_op;
  if (per_op) {
    std::printf("  %s (e = %g%s)\n", activation_formula(st).c_str(), f.element_bytes,
                per_rank.c_str());
  } else {
    std::printf("  %s bytes x e/2 (the table counts 16-bit elements; e = %g%s)\n",
                activation_formula(st).c_str(), f.element_bytes, per_rank.c_str());
  }
  if (st.recompute == scenario::Recompute::selective &&
      st.attention == scenario::Attention::flash) {
    std::printf(
        "  selective recomputation recomputes the attention core, which flash attention keeps "
        "no s×s tensors of: it saves nothing and is not planned\n");
  }
  std::printf("    = %s bytes = %s (%s)\n", grouped(f.act_layer).c_str(),
              bytes_text(f.act_layer).c_str(),
              per_op ? "torchtitan/distributed/activation_checkpoint.py"
                     : "Korthikanti et al. 2022, table 2");
  std::printf("  x %lld layers = %s per micro-batch in flight\n", static_cast<long long>(m.layers),
              bytes_text(f.act_layer * l).c_str());
  if (st.tp > 1) {
    std::printf(
        "  head: s·b·(h·%g%s + 4·V'/t) = %s (final norm input + vocab-parallel fp32 "
        "logits)\n",
        f.element_bytes, st.sequence_parallel ? "/t" : "", bytes_text(f.act_head).c_str());
    std::printf(
        "\nTensor parallelism (Megatron-LM), per rank of the tp %d group:\n"
        "  vocabulary padded to V' = %lld (a multiple of 128·tp = %d, as Megatron does)\n"
        "  embedding %s, per block %s (column/row-parallel matrices /t, norms and row-parallel "
        "biases whole), head %s parameters\n"
        "  per block and micro-batch: forward 2, backward 2 %s of s·b·h·%g = %s on the tp "
        "group\n",
        st.tp, static_cast<long long>(f.padded_vocab), 128 * st.tp, grouped(f.embedding_tp).c_str(),
        grouped(f.block_tp).c_str(), grouped(f.head_tp).c_str(),
        st.sequence_parallel ? "all-gather + reduce-scatter pairs" : "all-reduces", f.element_bytes,
        bytes_text(static_cast<double>(s.training.seq_len) / st.cp * st.micro_batch_size *
                   static_cast<double>(m.hidden) * f.element_bytes)
            .c_str());
  } else {
    std::printf("  head: s·b·(h·%g + 4·V) = %s (final norm input + fp32 logits)\n", f.element_bytes,
                bytes_text(f.act_head).c_str());
  }
  if (st.cp > 1) {
    const double kv = workload::context_kv_bytes(s);
    std::printf(
        "\nContext parallelism (Megatron-LM CP, ring attention), per rank of the cp %d group:\n"
        "  %lld of the %lld tokens of each sequence (2·cp = %d chunks, rank i holds chunks i and "
        "2·cp−1−i)\n"
        "  per block and micro-batch, overlapped with the attention core: forward an all-gather "
        "of K and V (S = %s, %d ring steps of %s), backward a K/V all-gather and a dK/dV "
        "reduce-scatter of the same size\n"
        "  gradients reduced and parameters sharded over dp × cp = %d ranks\n",
        st.cp, static_cast<long long>(s.training.seq_len / st.cp),
        static_cast<long long>(s.training.seq_len), 2 * st.cp, bytes_text(kv).c_str(), st.cp - 1,
        bytes_text(kv / st.cp).c_str(), st.dp * st.cp);
  }
}

Registration reg{{"info",
                  "Show a scenario's model: shape, parameters, FLOPs per token, activations", 20,
                  [](CLI::App& sub) {
                    auto file = std::make_shared<std::string>();
                    auto json = std::make_shared<bool>(false);
                    sub.add_option("scenario", *file, "Scenario file or shipped name")->required();
                    sub.add_flag("--json", *json, "Print JSON");
                    return std::function<int()>([file, json] {
                      const auto s = cli::load_scenario_to_describe(*file);
                      // A model beyond the dense blocks' description (mixture of experts, a
                      // head width apart from h / heads, q/k norms), or one the planner does
                      // not model yet.
                      const auto why = scenario::unsimulated_feature(s.model);
                      const auto& m = s.model;
                      const bool wide_heads = m.head_dim > 0 && m.head_dim * m.heads != m.hidden;
                      if (why || m.moe || wide_heads || m.qk_norm) {
                        if (*json) {
                          std::cout << described_json(s, why).dump(2) << "\n";
                        } else {
                          print_described(s, why);
                        }
                        return 0;
                      }
                      const Figures f = compute(s);
                      if (*json) {
                        std::cout << to_json(s, f).dump(2) << "\n";
                      } else {
                        print_report(s, f);
                      }
                      return 0;
                    });
                  }}};

}  // namespace
}  // namespace stratagem::cli
