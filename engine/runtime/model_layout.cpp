#include "engine/runtime/model_layout.hpp"

#include <cmath>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

// GPT-2's initialiser range (Radford et al. 2019; nanoGPT's _init_weights).
constexpr double kInitStd = 0.02;

// How a parameter is split over the TP group (model_layout.hpp).
enum class Split { whole, rows, cols };

class LayoutBuilder {
 public:
  LayoutBuilder(std::string prefix, TpShard tp) : prefix_(std::move(prefix)), tp_(tp) {}

  /// `shape` is the whole parameter's; `split` says which slice this rank holds.
  ParamSlot& add(const std::string& name, std::vector<std::int64_t> shape, InitKind init,
                 Split split = Split::whole, std::string key = "") {
    ParamSlot s;
    s.name = name;
    s.full_shape = shape;
    if (split != Split::whole && tp_.size > 1) {
      s.shard_dim = split == Split::rows ? 0 : 1;
      s.shards = tp_.size;
      s.shard_index = tp_.index;
      const auto d = static_cast<std::size_t>(s.shard_dim);
      if (shape[d] % tp_.size != 0) {
        throw RuntimeError("model unit " + prefix_ + name + ": dimension " +
                           std::to_string(shape[d]) + " is not divisible by tp = " +
                           std::to_string(tp_.size));
      }
      shape[d] /= tp_.size;
    }
    s.numel = 1;
    for (auto d : shape) s.numel *= d;
    s.shape = std::move(shape);
    s.offset = layout_.numel;
    s.init = init;
    s.init_key = key.empty() ? prefix_ + name : std::move(key);
    layout_.numel += s.numel;
    layout_.slots.push_back(std::move(s));
    return layout_.slots.back();
  }

  void norm(const std::string& name, const scenario::ModelSpec& m) {
    add(name + ".weight", {m.hidden}, InitKind::ones).sequence_partial = true;
    if (m.norm == scenario::NormKind::layernorm) {
      add(name + ".bias", {m.hidden}, InitKind::zeros).sequence_partial = true;
    }
  }

  /// Column-parallel (`Split::rows`: output rows and bias sliced) or row-parallel
  /// (`Split::cols`: input columns sliced, the bias whole and added after the reduction).
  void linear(const std::string& name, std::int64_t out, std::int64_t in, bool bias,
              Split split, InitKind init = InitKind::normal) {
    add(name + ".weight", {out, in}, init, split);
    if (bias) {
      auto& b = add(name + ".bias", {out}, InitKind::zeros,
                    split == Split::rows ? Split::rows : Split::whole);
      b.sequence_partial = split == Split::cols;
    }
  }

  /// A vocabulary table [padded vocab, h] sliced by rows, its padding rows left at zero.
  void vocab_table(const std::string& name, const scenario::ModelSpec& m, std::string key = "") {
    const std::int64_t rows = scenario::padded_vocab(m, tp_.size);
    add(name, {rows, m.hidden}, InitKind::normal, Split::rows, std::move(key)).drawn_rows =
        rows == m.vocab ? -1 : m.vocab;
  }

  UnitLayout take() { return std::move(layout_); }

 private:
  std::string prefix_;
  TpShard tp_;
  UnitLayout layout_;
};

}  // namespace

const ParamSlot& UnitLayout::slot(const std::string& name) const {
  for (const auto& s : slots) {
    if (s.name == name) return s;
  }
  throw RuntimeError("model unit has no parameter '" + name + "'");
}

bool UnitLayout::has(const std::string& name) const {
  for (const auto& s : slots) {
    if (s.name == name) return true;
  }
  return false;
}

void check_runtime_model(const scenario::ModelSpec& m) {
  if (m.measured) {
    throw SpecError("model.measured",
                    "a measured model (Accelerator::export_scenario) sizes a simulation; its "
                    "layers live in the user's program, so run that program with `stratagem "
                    "launch` instead");
  }
  if (m.params_given > 0) {
    throw SpecError("model.params",
                    "the real runtime needs a full model shape (layers, hidden, heads, vocab); "
                    "the quick {\"params\": P} form only sizes a simulation");
  }
  if (m.kind != scenario::ModelKind::decoder) {
    throw SpecError("model.kind", "the real runtime trains decoder (GPT-style) models");
  }
  if (m.type_vocab > 0) {
    throw SpecError("model.type_vocab", "token-type embeddings belong to encoders");
  }
  if (m.pooler) throw SpecError("model.pooler", "a pooler belongs to encoders");
  if (m.qk_norm) {
    throw SpecError("model.qk_norm",
                    "the real runtime's attention has no per-head q/k norms yet; "
                    "simulate the model with `stratagem sim`");
  }
  if (m.head_dim > 0 && m.head_dim * m.heads != m.hidden) {
    throw SpecError("model.head_dim",
                    "the real runtime's attention is heads x hidden / heads wide; simulate a "
                    "head width apart from it with `stratagem sim`");
  }
  if (m.moe) {
    throw SpecError("model.moe",
                    "the real runtime has no mixture-of-experts layer yet (router, token "
                    "all-to-all, grouped experts); simulate it with `stratagem sim`, `memory` "
                    "or `compare`");
  }
  if (m.positions == scenario::PositionKind::rotary && (m.hidden / m.heads) % 2 != 0) {
    throw SpecError("model.heads", "rotary positions need an even head dimension");
  }
}

void check_runtime_strategy(const scenario::StrategySpec& st) {
  if (st.cp > 1) {
    throw SpecError("strategy.cp",
                    "the real runtime does not execute context parallelism (cp = " +
                        std::to_string(st.cp) +
                        "); simulate it with `stratagem sim` or `stratagem compare`");
  }
  if (st.recompute == scenario::Recompute::selective_op) {
    throw SpecError("strategy.recompute",
                    "the real runtime checkpoints whole blocks or the attention core, not "
                    "torchtitan's per-op policy (selective-op); simulate it, or run with "
                    "'selective' or 'full'");
  }
  if (scenario::splits_backward(st.schedule)) {
    throw SpecError("strategy.schedule",
                    std::string("the real runtime runs gpipe, 1f1b and interleaved; the ") +
                        scenario::to_string(st.schedule) +
                        " schedule (backward split into input and weight gradients) is "
                        "simulated only: use `stratagem sim`, `memory` or `compare`");
  }
  if (st.precision == scenario::Precision::fp8) {
    throw SpecError("strategy.mixed_precision",
                    "the real runtime has no fp8 GEMMs (Transformer Engine or torchao float8 on "
                    "Hopper and later); simulate fp8, or run with bf16");
  }
}

std::int64_t vocab_shard_rows(const scenario::ModelSpec& m, int tp) {
  return scenario::padded_vocab(m, tp) / tp;
}

std::vector<UnitLayout> gpt_unit_layouts(const scenario::ModelSpec& m,
                                         bool head_owns_embedding_copy, TpShard tp) {
  check_runtime_model(m);
  if (tp.size > 1 && (m.heads % tp.size != 0 || m.kv_heads % tp.size != 0)) {
    throw SpecError("strategy.tp", "tp = " + std::to_string(tp.size) +
                                       " must divide the model's heads and kv_heads");
  }
  const std::int64_t h = m.hidden, f = m.ffn_hidden;
  const std::int64_t kv = h / m.heads * m.kv_heads;
  std::vector<UnitLayout> units;

  LayoutBuilder emb("embedding.", tp);
  emb.vocab_table("wte", m);
  if (m.positions == scenario::PositionKind::learned) {
    emb.add("wpe", {m.max_positions, h}, InitKind::normal);
  }
  units.push_back(emb.take());

  for (std::int64_t l = 1; l <= m.layers; ++l) {
    LayoutBuilder b("block" + std::to_string(l) + ".", tp);
    b.norm("ln1", m);
    b.linear("attn.q", h, h, m.bias, Split::rows);
    b.linear("attn.k", kv, h, m.bias, Split::rows);
    b.linear("attn.v", kv, h, m.bias, Split::rows);
    b.linear("attn.o", h, h, m.bias, Split::cols, InitKind::normal_residual);
    b.norm("ln2", m);
    if (m.mlp == scenario::MlpKind::swiglu) {
      b.linear("mlp.gate", f, h, m.bias, Split::rows);
      b.linear("mlp.up", f, h, m.bias, Split::rows);
    } else {
      b.linear("mlp.up", f, h, m.bias, Split::rows);
    }
    b.linear("mlp.down", h, f, m.bias, Split::cols, InitKind::normal_residual);
    units.push_back(b.take());
  }

  LayoutBuilder head("head.", tp);
  head.norm("ln_f", m);
  if (!m.tied_embeddings) {
    head.vocab_table("lm_head", m);
  } else if (head_owns_embedding_copy) {
    // Same random stream as the embedding's table: both copies start identical and, with
    // their gradients summed across the pipeline every step, stay identical.
    head.vocab_table("wte", m, "embedding.wte");
  }
  units.push_back(head.take());
  return units;
}

std::uint64_t init_seed(std::uint64_t seed, const ParamSlot& slot) {
  std::uint64_t x = 1469598103934665603ULL;  // FNV-1a offset basis
  for (unsigned char c : slot.init_key) {
    x ^= c;
    x *= 1099511628211ULL;  // FNV-1a prime
  }
  // splitmix64 finaliser over key ⊕ seed, so nearby seeds give unrelated streams.
  x ^= seed + 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

double init_std(const ParamSlot& slot, std::int64_t layers) {
  switch (slot.init) {
    case InitKind::normal:
      return kInitStd;
    case InitKind::normal_residual:
      return kInitStd / std::sqrt(2.0 * static_cast<double>(layers));
    case InitKind::zeros:
    case InitKind::ones:
      return 0.0;
  }
  return 0.0;
}

}  // namespace stratagem::runtime
