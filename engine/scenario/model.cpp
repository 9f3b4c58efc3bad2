#include "engine/scenario/model.hpp"

#include <algorithm>
#include <cmath>

#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

std::int64_t attention_head_dim(const ModelSpec& m) {
  return m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
}

double kv_dim(const ModelSpec& m) {
  if (m.head_dim > 0) return static_cast<double>(m.kv_heads) * static_cast<double>(m.head_dim);
  return static_cast<double>(m.hidden) * static_cast<double>(m.kv_heads) /
         static_cast<double>(m.heads);
}

UnsimulatedFeature unsimulated_feature(const ModelSpec& m) {
  const std::string later =
      ": `stratagem info` counts its parameters and FLOPs, but the planner, simulator and "
      "runtime do not model it yet";
  if (m.mla) return {"model.mla", "multi-head latent attention" + later};
  if (m.mtp_layers > 0) return {"model.mtp_layers", "multi-token prediction modules" + later};
  if (m.sliding_window) return {"model.sliding_window", "sliding-window attention" + later};
  if (m.attention_sinks) return {"model.attention_sinks", "attention sinks" + later};
  return {};
}

std::int64_t block_count(const ModelSpec& m, BlockKind kind) {
  const std::int64_t moe = m.moe ? moe_block_count(*m.moe, m.layers) : 0;
  return kind == BlockKind::moe ? moe : m.layers - moe;
}

double norm_params(const ModelSpec& m) {
  return m.norm == NormKind::layernorm ? 2.0 * m.hidden : 1.0 * m.hidden;
}

namespace {

// Width of the query projection and of the output projection's input: a·d (= h unless head_dim
// says otherwise).
double q_dim(const ModelSpec& m) {
  return static_cast<double>(m.heads) * static_cast<double>(attention_head_dim(m));
}

// The weight matrices of one block's attention: q, o (h·a·d each; 2h² when a·d = h) and k, v
// (h·kv_dim each), or MLA's.
double attention_matmul_params(const ModelSpec& m) {
  if (m.mla) return mla_matmul_params(*m.mla, m.hidden, m.heads);
  const double h = m.hidden;
  return 2.0 * h * q_dim(m) + 2.0 * h * kv_dim(m);
}

// One MLP's matrices of width f: two, three with SwiGLU.
double mlp_matmul_params(const ModelSpec& m, std::int64_t f) {
  return (m.mlp == MlpKind::swiglu ? 3.0 : 2.0) * static_cast<double>(m.hidden) *
         static_cast<double>(f);
}

// One MLP's biases of width f: its input layer's (2f with SwiGLU's fused gate and up, as GPT-OSS)
// and output layer's.
double mlp_bias_params(const ModelSpec& m, std::int64_t f) {
  const double fd = static_cast<double>(f);
  return (m.mlp == MlpKind::swiglu ? 2.0 * fd : fd) + static_cast<double>(m.hidden);
}

// One MLP of width f: its matrices and, with `bias`, its biases.
double mlp_params(const ModelSpec& m, std::int64_t f) {
  return mlp_matmul_params(m, f) + (m.bias ? mlp_bias_params(m, f) : 0.0);
}

}  // namespace

double block_matmul_params(const ModelSpec& m, BlockKind kind) {
  if (m.measured) return block_params(m);
  if (m.params_given > 0) return m.params_given / static_cast<double>(m.layers);
  if (kind == BlockKind::moe && m.moe) {
    const MoeSpec& e = *m.moe;
    return attention_matmul_params(m) +
           static_cast<double>(e.experts) * static_cast<double>(m.hidden) +  // router
           static_cast<double>(e.top_k) * mlp_matmul_params(m, e.expert_ffn_hidden) +
           static_cast<double>(e.shared_experts) * mlp_matmul_params(m, e.shared_expert_ffn_hidden);
  }
  return attention_matmul_params(m) + mlp_matmul_params(m, m.ffn_hidden);
}

namespace {

MeasuredUnit parse_measured_unit(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  MeasuredUnit u;
  u.name = r.string_or("name", "");
  u.params = r.number_or("params", 0, 0, 1e15);
  u.forward_flops = r.number_or("forward_flops", 0, 0, 1e20);
  u.activation_bytes = r.number_or("activation_bytes", 0, 0, 1e18);
  r.finish();
  return u;
}

double mean_block(const MeasuredModel& mm, double MeasuredUnit::*field) {
  double sum = 0;
  for (const auto& b : mm.blocks) sum += b.*field;
  return mm.blocks.empty() ? 0.0 : sum / static_cast<double>(mm.blocks.size());
}

ModelSpec parse_measured_model(ObjectReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  ObjectReader q(r.at("measured"), r.child_path("measured"));
  auto mm = std::make_shared<MeasuredModel>();
  mm->source = q.string_or("source", "");
  mm->element_bytes = q.number_or("element_bytes", 4, 1, 8);
  mm->boundary_bytes = q.number("boundary_bytes", 1, 1e15);
  if (q.has("input")) mm->input = parse_measured_unit(q.at("input"), q.child_path("input"));
  if (q.has("output")) mm->output = parse_measured_unit(q.at("output"), q.child_path("output"));
  const nlohmann::json& blocks = q.at("blocks");
  if (!blocks.is_array() || blocks.empty() || blocks.size() > 100000) {
    throw SpecError(q.child_path("blocks"), "must be a list of 1 to 100000 units");
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    mm->blocks.push_back(
        parse_measured_unit(blocks[i], q.child_path("blocks") + "[" + std::to_string(i) + "]"));
  }
  q.finish();
  double params = mm->input.params + mm->output.params;
  for (const auto& b : mm->blocks) params += b.params;
  if (params <= 0) throw SpecError(q.path(), "the units have no parameters");
  m.layers = static_cast<std::int64_t>(mm->blocks.size());
  // The width of the stream between blocks (elements per sample unless "hidden" gives it per
  // token): GEMM shapes for the compute model's efficiency curve.
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  m.hidden = r.integer_or(
      "hidden", std::max<std::int64_t>(1, std::llround(mm->boundary_bytes / mm->element_bytes)), 1,
      kBig);
  m.heads = m.kv_heads = 1;
  m.bias = false;
  m.positions = PositionKind::rotary;
  m.measured = std::move(mm);
  r.finish();
  return m;
}

}  // namespace

ModelSpec parse_model(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  ModelSpec m;
  r.allow({"preset"});
  r.allow_text({"description", "source"});
  m.name = r.string_or("name", "custom");
  if (r.has("measured")) return parse_measured_model(r, m.name);
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  if (r.has("params")) {
    // Quick form: a size and a depth, shape estimated.
    m.params_given = r.number("params", 1e3, 1e15);
    m.layers = r.integer("layers", 1, 100000);
    const double h_estimate = std::sqrt(m.params_given / (12.0 * m.layers));
    m.hidden = r.integer_or(
        "hidden", std::max<std::int64_t>(64, std::llround(h_estimate / 64) * 64), 1, kBig);
    // Heads of 128 (GPT-3's and Llama's head size) where they divide hidden, else of 64, so
    // the head dimension is whole.
    const std::int64_t head_dim = m.hidden % 128 == 0 ? 128 : m.hidden % 64 == 0 ? 64 : m.hidden;
    m.heads = r.integer_or("heads", m.hidden / head_dim, 1, m.hidden);
    if (m.hidden % m.heads != 0) {
      throw SpecError(r.child_path("heads"), "hidden (" + std::to_string(m.hidden) +
                                                 ") must be divisible by heads (" +
                                                 std::to_string(m.heads) + ")");
    }
    m.kv_heads = m.heads;
    m.ffn_hidden = 4 * m.hidden;
    m.vocab = r.integer_or("vocab", 0, 0, kBig);
    m.bias = false;
    m.positions = PositionKind::rotary;
    r.finish();
    return m;
  }
  m.kind = r.choice_or("kind", "decoder", {"decoder", "encoder"}) == "encoder" ? ModelKind::encoder
                                                                               : ModelKind::decoder;
  m.layers = r.integer("layers", 1, 100000);
  m.hidden = r.integer("hidden", 1, kBig);
  m.heads = r.integer("heads", 1, m.hidden);
  if (m.hidden % m.heads != 0) {
    throw SpecError(r.child_path("heads"), "hidden (" + std::to_string(m.hidden) +
                                               ") must be divisible by heads (" +
                                               std::to_string(m.heads) + ")");
  }
  m.kv_heads = r.integer_or("kv_heads", m.heads, 1, m.heads);
  if (m.heads % m.kv_heads != 0) {
    throw SpecError(r.child_path("kv_heads"), "heads (" + std::to_string(m.heads) +
                                                  ") must be divisible by kv_heads (" +
                                                  std::to_string(m.kv_heads) + ")");
  }
  if (r.has("mla")) {
    m.mla = parse_mla(r.at("mla"), r.child_path("mla"));
    if (m.kv_heads != m.heads) {
      throw SpecError(r.child_path("kv_heads"),
                      "latent attention (mla) has no key/value head groups: every head reads the "
                      "shared latent; drop kv_heads");
    }
    if (r.has("head_dim")) {
      throw SpecError(r.child_path("head_dim"),
                      "latent attention sets its head widths in mla (qk_nope_head_dim, "
                      "qk_rope_head_dim, v_head_dim); drop head_dim");
    }
  }
  m.head_dim = r.integer_or("head_dim", 0, 1, kBig);
  m.qk_norm = r.boolean_or("qk_norm", false);
  m.attention_sinks = r.boolean_or("attention_sinks", false);
  m.mlp =
      r.choice_or("mlp", "gelu", {"gelu", "swiglu"}) == "swiglu" ? MlpKind::swiglu : MlpKind::gelu;
  m.ffn_hidden = r.integer_or("ffn_hidden", 4 * m.hidden, 1, kBig);
  if (r.has("moe")) m.moe = parse_moe(r.at("moe"), r.child_path("moe"), m.layers);
  if (m.moe && m.moe->dense_layers == 0 && m.moe->layer_freq == 1 && r.has("ffn_hidden")) {
    throw SpecError(r.child_path("ffn_hidden"),
                    "every block is a mixture of experts (moe.dense_layers 0, moe.layer_freq 1), "
                    "so no block has a dense MLP of this width; drop ffn_hidden (the experts' "
                    "width is moe.expert_ffn_hidden)");
  }
  m.mtp_layers = r.integer_or("mtp_layers", 0, 0, 64);
  if (r.has("sliding_window")) {
    ObjectReader w(r.at("sliding_window"), r.child_path("sliding_window"));
    ModelSpec::SlidingWindow sw;
    sw.tokens = w.integer("tokens", 1, kBig);
    sw.full_every = w.integer_or("full_every", 0, 0, m.layers);
    w.finish();
    m.sliding_window = sw;
  }
  m.vocab = r.integer("vocab", 1, kBig);
  m.norm = r.choice_or("norm", "layernorm", {"layernorm", "rmsnorm"}) == "rmsnorm"
               ? NormKind::rmsnorm
               : NormKind::layernorm;
  m.positions = r.choice_or("positions", "learned", {"learned", "rotary"}) == "rotary"
                    ? PositionKind::rotary
                    : PositionKind::learned;
  m.max_positions =
      r.integer_or("max_positions", m.positions == PositionKind::learned ? 2048 : 0, 0, kBig);
  if (m.positions == PositionKind::learned && m.max_positions == 0) {
    throw SpecError(r.child_path("max_positions"),
                    "learned positions need a table of at least seq_len rows; 0 leaves none (use "
                    "\"positions\": \"rotary\" for a model without one)");
  }
  m.type_vocab = r.integer_or("type_vocab", 0, 0, kBig);
  m.tied_embeddings = r.boolean_or("tied_embeddings", m.kind == ModelKind::decoder);
  m.bias = r.boolean_or("bias", true);
  m.pooler = r.boolean_or("pooler", false);
  r.finish();
  return m;
}

double routed_expert_params(const ModelSpec& m) {
  return m.moe ? mlp_params(m, m.moe->expert_ffn_hidden) : 0.0;
}

BlockParamsBreakdown block_params_breakdown(const ModelSpec& m, BlockKind kind) {
  BlockParamsBreakdown b;
  if (m.params_given > 0 || m.measured) {  // the size is given, not its parts
    b.mlp = b.mlp_active = block_params(m);
    return b;
  }
  const double h = m.hidden;
  b.attention = m.mla ? mla_params(*m.mla, m.hidden, m.heads) : attention_matmul_params(m);
  if (m.bias && !m.mla) b.attention += q_dim(m) + 2.0 * kv_dim(m) + h;  // q, k, v, o (MLA: none)
  if (m.attention_sinks) b.attention += static_cast<double>(m.heads);
  b.norms = 2.0 * norm_params(m);  // two norms per block
  if (m.qk_norm) b.norms += 2.0 * static_cast<double>(attention_head_dim(m));
  if (kind == BlockKind::moe && m.moe) {
    const MoeSpec& e = *m.moe;
    const double expert = routed_expert_params(m);
    const double shared =
        static_cast<double>(e.shared_experts) * mlp_params(m, e.shared_expert_ffn_hidden);
    const double experts = static_cast<double>(e.experts);
    b.mlp = experts * expert + shared;
    b.mlp_active = static_cast<double>(e.top_k) * expert + shared;
    b.router = experts * h + (m.bias ? experts : 0.0) +
               (e.router == RouterKind::sigmoid_bias ? experts : 0.0);
    return b;
  }
  b.mlp = b.mlp_active = mlp_params(m, m.ffn_hidden);
  return b;
}

std::int64_t padded_vocab(const ModelSpec& m, int tp) {
  if (tp <= 1) return m.vocab;
  const std::int64_t multiple = 128 * static_cast<std::int64_t>(tp);
  return (m.vocab + multiple - 1) / multiple * multiple;
}

double block_params(const ModelSpec& m) {
  if (m.measured) return mean_block(*m.measured, &MeasuredUnit::params);
  if (m.params_given > 0) return m.params_given / static_cast<double>(m.layers);
  const BlockParamsBreakdown b = block_params_breakdown(m);
  return b.attention + b.mlp + b.norms;
}

double embedding_params(const ModelSpec& m) {
  if (m.measured) return m.measured->input.params;
  if (m.params_given > 0) return 0;
  const double h = m.hidden;
  double p = static_cast<double>(m.vocab) * h;
  if (m.positions == PositionKind::learned) p += static_cast<double>(m.max_positions) * h;
  p += static_cast<double>(m.type_vocab) * h;
  if (m.kind == ModelKind::encoder) p += norm_params(m);  // BERT normalises embeddings
  return p;
}

double head_params(const ModelSpec& m) {
  if (m.measured) return m.measured->output.params;
  if (m.params_given > 0) return 0;
  const double h = m.hidden;
  double p = m.kind == ModelKind::decoder ? norm_params(m) : 0.0;  // final norm (pre-LN)
  if (!m.tied_embeddings) p += static_cast<double>(m.vocab) * h;
  if (m.pooler) p += h * h + h;
  return p;
}

namespace {

double sum_of_parts(const BlockParamsBreakdown& b, bool active) {
  return b.attention + (active ? b.mlp_active : b.mlp) + b.norms + b.router;
}

// The blocks' parameters, every expert (active: top_k routed + shared per MoE block).
double blocks_params(const ModelSpec& m, bool active) {
  if (!m.moe) return static_cast<double>(m.layers) * block_params(m);
  double p = 0;
  for (BlockKind k : {BlockKind::dense, BlockKind::moe}) {
    p +=
        static_cast<double>(block_count(m, k)) * sum_of_parts(block_params_breakdown(m, k), active);
  }
  return p;
}

// The kind of the last block, which the MTP modules repeat.
BlockKind last_block_kind(const ModelSpec& m) {
  return m.moe && is_moe_block(*m.moe, m.layers - 1) ? BlockKind::moe : BlockKind::dense;
}

}  // namespace

double total_params(const ModelSpec& m) {
  if (m.measured) {
    double p = m.measured->input.params + m.measured->output.params;
    for (const auto& b : m.measured->blocks) p += b.params;
    return p;
  }
  if (m.params_given > 0) return m.params_given;
  return embedding_params(m) + blocks_params(m, false) + head_params(m);
}

double active_params(const ModelSpec& m) {
  if (m.measured || m.params_given > 0 || !m.moe) return total_params(m);
  return embedding_params(m) + blocks_params(m, true) + head_params(m);
}

double mtp_params(const ModelSpec& m) {
  if (m.mtp_layers == 0) return 0;
  const double h = static_cast<double>(m.hidden);
  // enorm, hnorm and the module's final norm; eh_proj 2h -> h; the block.
  const double module = 3.0 * norm_params(m) + 2.0 * h * h +
                        sum_of_parts(block_params_breakdown(m, last_block_kind(m)), false);
  return static_cast<double>(m.mtp_layers) * module;
}

double matmul_params(const ModelSpec& m) {
  if (m.measured) return total_params(m);
  const double head = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  if (!m.moe && m.mtp_layers == 0) {
    return static_cast<double>(m.layers) * block_matmul_params(m) + head;
  }
  double p = head;
  for (BlockKind k : {BlockKind::dense, BlockKind::moe}) {
    p += static_cast<double>(block_count(m, k)) * block_matmul_params(m, k);
  }
  const double h = static_cast<double>(m.hidden);
  p += static_cast<double>(m.mtp_layers) *
       (2.0 * h * h + block_matmul_params(m, last_block_kind(m)) + head);
  return p;
}

double attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
  const double s = static_cast<double>(seq_len);
  const double a = static_cast<double>(m.heads), d = static_cast<double>(attention_head_dim(m));
  const double qk =
      m.mla ? static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim) : d;
  const double v = m.mla ? static_cast<double>(m.mla->v_head_dim) : d;
  return 2.0 * s * a * (qk + v);
}

bool sliding_window_block(const ModelSpec& m, std::int64_t i) {
  if (!m.sliding_window) return false;
  const std::int64_t every = m.sliding_window->full_every;
  return every == 0 || (i + 1) % every != 0;
}

double blocks_attention_core_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
  if (!m.sliding_window) {
    return static_cast<double>(m.layers) * attention_core_flops_per_token(m, seq_len);
  }
  const std::int64_t span = std::min(seq_len, m.sliding_window->tokens);
  double flops = 0;
  for (std::int64_t i = 0; i < m.layers; ++i) {
    flops += attention_core_flops_per_token(m, sliding_window_block(m, i) ? span : seq_len);
  }
  return flops;
}

double block_forward_flops_per_token(const ModelSpec& m, std::int64_t seq_len, BlockKind kind) {
  if (m.measured) {
    return mean_block(*m.measured, &MeasuredUnit::forward_flops) / static_cast<double>(seq_len);
  }
  // 2 FLOPs per multiply-add for each weight, plus Q·Kᵀ and scores·V (2·2·s·h for a·d = h).
  return 2.0 * block_matmul_params(m, kind) + attention_core_flops_per_token(m, seq_len);
}

double head_forward_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
  if (m.measured) return m.measured->output.forward_flops / static_cast<double>(seq_len);
  return 2.0 * static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
}

double training_flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
  // Backward costs twice the forward: 3 × forward.
  const double input =
      m.measured ? m.measured->input.forward_flops / static_cast<double>(seq_len) : 0.0;
  if (!m.moe && m.mtp_layers == 0 && !m.sliding_window) {
    return 3.0 *
           (input + static_cast<double>(m.layers) * block_forward_flops_per_token(m, seq_len) +
            head_forward_flops_per_token(m, seq_len));
  }
  // The blocks' matrices by kind, and each block's attention core at its own span.
  double forward =
      head_forward_flops_per_token(m, seq_len) + blocks_attention_core_flops_per_token(m, seq_len);
  for (BlockKind k : {BlockKind::dense, BlockKind::moe}) {
    forward += static_cast<double>(block_count(m, k)) * 2.0 * block_matmul_params(m, k);
  }
  // Each MTP module: its 2h -> h projection, its block (full attention), and the shared LM
  // head again.
  const double h = static_cast<double>(m.hidden);
  forward += static_cast<double>(m.mtp_layers) *
             (4.0 * h * h + block_forward_flops_per_token(m, seq_len, last_block_kind(m)) +
              head_forward_flops_per_token(m, seq_len));
  return 3.0 * forward;
}

std::vector<LinearShape> block_linears(const ModelSpec& m, int tp) {
  const double t = tp, h = static_cast<double>(m.hidden), kv = kv_dim(m), q = q_dim(m);
  const double f = static_cast<double>(m.ffn_hidden);
  std::vector<LinearShape> linears{{q / t, h}, {kv / t, h}, {kv / t, h}, {h, q / t}};  // q k v o
  if (m.mlp == MlpKind::swiglu) {
    linears.insert(linears.end(), {{f / t, h}, {f / t, h}, {h, f / t}});  // w1, w3, w2
  } else {
    linears.insert(linears.end(), {{f / t, h}, {h, f / t}});  // fc1, fc2
  }
  return linears;
}

double per_op_recompute_flops_per_token(const ModelSpec& m, int tp) {
  const std::vector<LinearShape> linears = block_linears(m, tp);
  double flops = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (!per_op_checkpoint_saves(m, i)) flops += 2.0 * linears[i].out * linears[i].in;
  }
  return flops;
}

bool per_op_checkpoint_saves(const ModelSpec& m, std::size_t linear) {
  return !m.bias && linear % 2 == 0;
}

double per_op_checkpoint_bytes(const ModelSpec& m, std::int64_t seq_len, std::int64_t micro_batch,
                               double e, ActivationLayout layout) {
  const double t = layout.tp;
  const double tokens = static_cast<double>(seq_len) / layout.cp * static_cast<double>(micro_batch);
  const double h = static_cast<double>(m.hidden);
  const bool sp = layout.sequence_parallel && layout.tp > 1;
  // The block's input, which the checkpoint wrapper keeps.
  double bytes = e * tokens * h / (sp ? t : 1.0);
  const std::vector<LinearShape> linears = block_linears(m, layout.tp);
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (per_op_checkpoint_saves(m, i)) bytes += e * tokens * linears[i].out;
  }
  // The fused attention's output and fp32 log-sum-exp per head and row (eager attention's
  // batched matmuls and softmax are not on the list: recomputed).
  if (layout.flash) bytes += e * tokens * h / t + 4.0 * tokens * static_cast<double>(m.heads) / t;
  // Sequence parallelism's two reduce-scatters (after the projection and MLP-out).
  if (sp) bytes += 2.0 * e * tokens * h / t;
  return bytes;
}

double activation_bytes_per_layer(const ModelSpec& m, std::int64_t seq_len,
                                  std::int64_t micro_batch, Recompute recompute,
                                  double bytes_per_element, ActivationLayout layout) {
  const double s = seq_len, b = micro_batch, h = m.hidden, a = m.heads;
  if (m.measured) {
    const double scale = bytes_per_element / m.measured->element_bytes;
    if (recompute == Recompute::full) return b * m.measured->boundary_bytes * scale;
    return b * mean_block(*m.measured, &MeasuredUnit::activation_bytes) * scale;
  }
  if (recompute == Recompute::selective_op) {
    return per_op_checkpoint_bytes(m, seq_len, micro_batch, bytes_per_element, layout);
  }
  const double scale = bytes_per_element / 2.0;  // the table is for 16-bit activations
  const double t = layout.tp, local = s / layout.cp;
  const double c = layout.sequence_parallel ? 1.0 / t : 1.0;
  const double sbh = local * b * h;
  if (recompute == Recompute::full) return 2.0 * c * sbh * scale;
  double bytes = sbh * (10.0 * c + 24.0 / t) * scale;
  if (layout.fp8_inputs) bytes -= sbh * (2.0 * c + 5.0 / t);
  if (recompute == Recompute::selective) return bytes;
  if (layout.flash) return bytes + 4.0 * a / t * local * b;
  return bytes + 5.0 * a * s * s * b / t * scale;
}

double head_activation_bytes(const ModelSpec& m, std::int64_t seq_len, std::int64_t micro_batch,
                             double bytes_per_element, ActivationLayout layout) {
  if (m.measured) {
    return static_cast<double>(micro_batch) * m.measured->output.activation_bytes *
           bytes_per_element / m.measured->element_bytes;
  }
  const double sb = static_cast<double>(seq_len) / layout.cp * static_cast<double>(micro_batch);
  if (layout.tp > 1) {
    const double t = layout.tp;
    const double input =
        static_cast<double>(m.hidden) * bytes_per_element / (layout.sequence_parallel ? t : 1.0);
    return sb * (input + 4.0 * static_cast<double>(padded_vocab(m, layout.tp)) / t);
  }
  return sb * (static_cast<double>(m.hidden) * bytes_per_element + 4.0 * m.vocab);
}

}  // namespace stratagem::scenario
