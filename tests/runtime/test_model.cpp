// The runtime's GPT units: parameter counts equal the spec's formulas, unit-by-unit backward
// on detached boundaries equals one autograd pass over the whole model, recomputation changes
// nothing numerically, initialisation depends only on the seed, and the data of a step is the
// same samples however the step is split.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/ATen.h>

#include "engine/runtime/data.hpp"
#include "engine/runtime/model_layout.hpp"
#include "engine/runtime/model_units.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/tensor_shapes.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

using runtime::GptUnits;
using runtime::Numerics;

scenario::ModelSpec model_of(const nlohmann::json& overrides = {}) {
  return tiny_scenario(1, {}, overrides).model;
}

const c10::Device kCpu(c10::kCPU);

TEST(ModelUnits, CountsEqualTheSpec) {
  for (const auto& m : {model_of(), model_of({{"tied_embeddings", true}}),
                        model_of({{"norm", "rmsnorm"},
                                  {"mlp", "swiglu"},
                                  {"positions", "rotary"},
                                  {"kv_heads", 2},
                                  {"bias", false}})}) {
    for (bool copy : {false, true}) {
      GptUnits units(m, 16, copy && m.tied_embeddings, Numerics{}, kCpu);
      ASSERT_EQ(units.count(), m.layers + 2);
      EXPECT_EQ(units.numel(0), static_cast<std::int64_t>(scenario::embedding_params(m)));
      for (int u = 1; u <= m.layers; ++u) {
        EXPECT_EQ(units.numel(u), static_cast<std::int64_t>(scenario::block_params(m)));
      }
      const double head = scenario::head_params(m) +
                          (copy && m.tied_embeddings ? static_cast<double>(m.vocab * m.hidden) : 0);
      EXPECT_EQ(units.numel(units.head_unit()), static_cast<std::int64_t>(head));
    }
  }
}

TEST(ModelUnits, TensorParallelSlicesCountAsTheSpecAndReassembleTheWholeModel) {
  // One TP rank's units hold scenario::*_params_tp; their slices, laid side by side along each
  // slot's split dimension (vocabulary padding cut off), are the tp = 1 units exactly.
  for (const auto& m : {model_of({{"vocab", 300}}),
                        model_of({{"vocab", 300}, {"tied_embeddings", true}}),
                        model_of({{"vocab", 300},
                                  {"norm", "rmsnorm"},
                                  {"mlp", "swiglu"},
                                  {"positions", "rotary"},
                                  {"kv_heads", 2},
                                  {"bias", false}})}) {
    for (int tp : {2, 4}) {
      if (m.kv_heads % tp != 0) continue;
      for (bool copy : {false, true}) {
        const bool owns_copy = copy && m.tied_embeddings;
        const GptUnits whole(m, 16, owns_copy, Numerics{}, kCpu);
        std::vector<GptUnits> ranks;
        for (int r = 0; r < tp; ++r)
          ranks.emplace_back(m, 16, owns_copy, Numerics{}, kCpu, runtime::TpShard{tp, r});
        const double table = static_cast<double>(scenario::padded_vocab(m, tp)) / tp * m.hidden;
        EXPECT_EQ(ranks[0].numel(0),
                  static_cast<std::int64_t>(scenario::embedding_params_tp(m, tp)));
        EXPECT_EQ(ranks[0].numel(1), static_cast<std::int64_t>(scenario::block_params_tp(m, tp)));
        EXPECT_EQ(
            ranks[0].numel(ranks[0].head_unit()),
            static_cast<std::int64_t>(scenario::head_params_tp(m, tp) + (owns_copy ? table : 0)));
        for (int u : {0, 1, whole.head_unit()}) {
          std::vector<at::Tensor> parts;
          for (const auto& slot : ranks[0].layout(u).slots) {
            std::vector<at::Tensor> slices;
            for (auto& r : ranks) {
              slices.push_back(
                  r.initial_params(u, 7).narrow(0, slot.offset, slot.numel).view(slot.shape));
            }
            at::Tensor t = slot.shard_dim < 0 ? slices[0] : at::cat(slices, slot.shard_dim);
            if (slot.drawn_rows >= 0) t = t.narrow(0, 0, slot.drawn_rows);
            parts.push_back(t.reshape({-1}));
          }
          EXPECT_TRUE(at::cat(parts).equal(whole.initial_params(u, 7)))
              << "tp " << tp << " unit " << u;
        }
      }
    }
  }
}

TEST(ModelUnits, RejectsWhatItCannotTrain) {
  auto m = model_of();
  m.kind = scenario::ModelKind::encoder;
  EXPECT_THROW(runtime::check_runtime_model(m), SpecError);
  m = model_of();
  m.params_given = 1e9;
  EXPECT_THROW(runtime::check_runtime_model(m), SpecError);
}

TEST(ModelUnits, InitialisationDependsOnlyOnTheSeed) {
  const auto m = model_of({{"tied_embeddings", true}});
  GptUnits a(m, 16, true, Numerics{}, kCpu), b(m, 16, true, Numerics{}, kCpu);
  for (int u = 0; u < a.count(); ++u) {
    EXPECT_TRUE(a.initial_params(u, 7).equal(b.initial_params(u, 7))) << "unit " << u;
    EXPECT_FALSE(a.initial_params(u, 7).equal(a.initial_params(u, 8))) << "unit " << u;
  }
  // The head's copy of tied word embeddings starts equal to the embedding's table.
  const auto& slot = a.layout(a.head_unit()).slot("wte");
  const auto table = m.vocab * m.hidden;
  EXPECT_TRUE(a.initial_params(a.head_unit(), 7)
                  .narrow(0, slot.offset, slot.numel)
                  .equal(a.initial_params(0, 7).narrow(0, 0, table)));
  // GPT-2 scales residual projections by 1/sqrt(2L).
  const auto block = a.initial_params(1, 7);
  const auto& o = a.layout(1).slot("attn.o.weight");
  const auto& q = a.layout(1).slot("attn.q.weight");
  const double std_o = block.narrow(0, o.offset, o.numel).std().item<double>();
  const double std_q = block.narrow(0, q.offset, q.numel).std().item<double>();
  EXPECT_NEAR(std_q, 0.02, 0.002);
  EXPECT_NEAR(std_o, 0.02 / std::sqrt(8.0), 0.001);
}

// Forward and backward unit by unit (detached boundaries, like the executor) and, for
// comparison, one autograd graph over the chained units.
struct Grads {
  std::vector<at::Tensor> params;
  double loss = 0;
};

Grads unitwise(const GptUnits& units, const std::vector<at::Tensor>& params,
               const at::Tensor& tokens, scenario::Recompute rc) {
  const auto s = tokens.size(1) - 1;
  std::vector<runtime::UnitActivation> acts;
  at::Tensor x = tokens.narrow(1, 0, s);
  const int head = units.head_unit();
  for (int u = 0; u <= head; ++u) {
    at::Tensor borrowed;
    if (u == head && units.head_borrows_embedding()) {
      borrowed = params[0].narrow(0, 0, units.layout(0).slot("wte").numel);
    }
    acts.push_back(units.forward(u, params[u], borrowed, x,
                                 u == head ? tokens.narrow(1, 1, s) : at::Tensor(),
                                 u > 0 && u < head ? rc : scenario::Recompute::none));
    if (u < head) x = units.to_boundary(acts.back().output);
  }
  Grads g;
  g.loss = acts.back().loss;
  g.params.resize(params.size());
  at::Tensor grad = at::ones({});
  for (int u = head; u >= 0; --u) {
    units.recompute(acts[u], params[u]);
    auto r = units.backward(acts[u], grad);
    g.params[u] = g.params[u].defined() ? g.params[u] + r.params : r.params;
    if (r.borrowed.defined()) {
      g.params[0] = at::zeros_like(params[0]);
      g.params[0].narrow(0, 0, r.borrowed.numel()).add_(r.borrowed);
    }
    grad = r.input;
  }
  return g;
}

TEST(ModelUnits, UnitwiseGradientsMatchFiniteDifferences) {
  // Backward unit by unit on detached boundaries must give the gradient of the whole model's
  // loss: check the largest gradient entry of several units against central differences.
  for (bool tied : {false, true}) {
    const auto m = model_of({{"tied_embeddings", tied}});
    GptUnits units(m, 16, false, Numerics{}, kCpu);
    std::vector<at::Tensor> params;
    for (int u = 0; u < units.count(); ++u) params.push_back(units.initial_params(u, 3));
    auto data = runtime::make_synthetic_data(m.vocab, 3);
    std::vector<std::int64_t> tok(2 * 17);
    data->sample(0, 17, tok.data());
    data->sample(1, 17, tok.data() + 17);
    const auto tokens = at::tensor(tok).view({2, 17});
    const Grads g = unitwise(units, params, tokens, scenario::Recompute::none);
    for (int u : {0, 2, units.head_unit()}) {
      const auto& gp = g.params[u];
      const auto idx = gp.abs().argmax().item<std::int64_t>();
      const double eps = 1e-2;
      auto plus = params, minus = params;
      plus[u] = params[u].clone();
      minus[u] = params[u].clone();
      plus[u][idx] += eps;
      minus[u][idx] -= eps;
      const double lp = unitwise(units, plus, tokens, scenario::Recompute::none).loss;
      const double lm = unitwise(units, minus, tokens, scenario::Recompute::none).loss;
      const double fd = (lp - lm) / (2 * eps);
      EXPECT_NEAR(gp[idx].item<double>(), fd, 2e-2 * std::abs(fd) + 1e-4)
          << "unit " << u << (tied ? " tied" : "");
    }
  }
}

TEST(ModelUnits, RecomputationIsNumericallyIdentical) {
  const auto m = model_of({{"kv_heads", 2}, {"positions", "rotary"}});
  GptUnits units(m, 16, false, Numerics{}, kCpu);
  std::vector<at::Tensor> params;
  for (int u = 0; u < units.count(); ++u) params.push_back(units.initial_params(u, 5));
  std::vector<std::int64_t> tok(3 * 17);
  auto data = runtime::make_synthetic_data(m.vocab, 5);
  for (int i = 0; i < 3; ++i) data->sample(i, 17, tok.data() + 17 * i);
  const auto tokens = at::tensor(tok).view({3, 17});
  const Grads none = unitwise(units, params, tokens, scenario::Recompute::none);
  for (auto rc : {scenario::Recompute::selective, scenario::Recompute::full}) {
    const Grads g = unitwise(units, params, tokens, rc);
    EXPECT_EQ(g.loss, none.loss);
    for (std::size_t u = 0; u < params.size(); ++u) {
      EXPECT_TRUE(g.params[u].allclose(none.params[u], 0, 1e-7)) << "unit " << u;
    }
  }
}

TEST(Data, AStepIsTheSameSamplesHoweverItIsSplit) {
  auto collect = [](const scenario::Scenario& s, std::int64_t step) {
    std::multiset<std::int64_t> idx;
    for (int d = 0; d < s.strategy.dp; ++d) {
      for (int mb = 0; mb < s.strategy.grad_accum; ++mb) {
        for (int i = 0; i < s.strategy.micro_batch_size; ++i) {
          idx.insert(runtime::sample_index(s, step, d, mb, i));
        }
      }
    }
    return idx;
  };
  const auto one = tiny_scenario(1, {{"micro_batch_size", 1}, {"grad_accum", 8}});
  const auto ddp = tiny_scenario(4, {{"dp", 4}, {"micro_batch_size", 2}});
  const auto pp = tiny_scenario(2, {{"pp", 2}, {"micro_batch_size", 4}});
  for (std::int64_t step : {0, 3}) {
    const auto ref = collect(one, step);
    EXPECT_EQ(ref.size(), 8u);
    EXPECT_EQ(*ref.begin(), step * 8);
    EXPECT_EQ(collect(ddp, step), ref);
    EXPECT_EQ(collect(pp, step), ref);
  }
  // DistributedSampler-style contiguous shards: rank 1 of 4 starts at sample 2.
  EXPECT_EQ(runtime::sample_index(ddp, 0, 1, 0, 0), 2);
}

TEST(Data, SyntheticLanguageIsDeterministicAndMostlyPredictable) {
  auto a = runtime::make_synthetic_data(64, 9), b = runtime::make_synthetic_data(64, 9);
  std::vector<std::int64_t> x(200), y(200);
  a->sample(42, 200, x.data());
  b->sample(42, 200, y.data());
  EXPECT_EQ(x, y);
  // Successors repeat: the most common successor of a token covers most of its occurrences.
  std::map<std::int64_t, std::map<std::int64_t, int>> next;
  for (int s = 0; s < 50; ++s) {
    a->sample(s, 200, x.data());
    for (int t = 1; t < 200; ++t) ++next[x[t - 1]][x[t]];
  }
  int top = 0, all = 0;
  for (const auto& [tok, succ] : next) {
    int best = 0;
    for (const auto& [n, c] : succ) {
      best = std::max(best, c);
      all += c;
    }
    top += best;
  }
  EXPECT_GT(static_cast<double>(top) / all, 0.85);
}

TEST(Data, TextNeedsAByteVocabulary) {
  const auto dir = std::filesystem::temp_directory_path() / "stratagem-test-data";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.txt").string();
  std::ofstream(path) << "hello world, this is a small text for byte-level training data";
  EXPECT_THROW(runtime::make_text_data(path, 64, 16, 1), SpecError);
  auto d = runtime::make_text_data(path, 256, 16, 1);
  std::vector<std::int64_t> x(17);
  d->sample(0, 17, x.data());
  for (auto v : x) EXPECT_LT(v, 256);
  EXPECT_THROW(runtime::make_text_data(path, 256, 1000, 1), SpecError);
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem::test {
namespace {

// The fused (flash) attention core against the eager one: same loss and gradients, and it
// keeps no s×s tensor for backward.
TEST(ModelUnits, FusedAttentionMatchesEagerAttention) {
  const auto m = model_of({{"kv_heads", 2}, {"positions", "rotary"}});
  Numerics fused;
  fused.fused_attention = true;
  GptUnits eager_units(m, 16, false, Numerics{}, kCpu), fused_units(m, 16, false, fused, kCpu);
  std::vector<at::Tensor> params;
  for (int u = 0; u < eager_units.count(); ++u) params.push_back(eager_units.initial_params(u, 7));
  std::vector<std::int64_t> tok(2 * 17);
  auto data = runtime::make_synthetic_data(m.vocab, 7);
  for (int i = 0; i < 2; ++i) data->sample(i, 17, tok.data() + 17 * i);
  const auto tokens = at::tensor(tok).view({2, 17});
  const Grads e = unitwise(eager_units, params, tokens, scenario::Recompute::none);
  const Grads f = unitwise(fused_units, params, tokens, scenario::Recompute::none);
  EXPECT_NEAR(f.loss, e.loss, 1e-5 * std::abs(e.loss));
  for (std::size_t u = 0; u < params.size(); ++u) {
    EXPECT_TRUE(f.params[u].allclose(e.params[u], 1e-4, 1e-6)) << "unit " << u;
  }
}

// torchtitan's per-op checkpointing is simulated only: the runtime checkpoints whole blocks or
// the attention core, and says so naming the key.
TEST(ModelUnits, PerOpCheckpointingIsRefusedByName) {
  scenario::StrategySpec st;
  st.recompute = scenario::Recompute::selective_op;
  try {
    runtime::check_runtime_strategy(st);
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.recompute");
  }
}

// The zero-bubble schedules are simulated only (#42: the executor does not split backward
// into input and weight gradients yet), refused naming the key.
TEST(ModelUnits, ZeroBubbleSchedulesAreRefusedByName) {
  for (const auto schedule : {scenario::Schedule::zb_h1, scenario::Schedule::interleaved_zb,
                              scenario::Schedule::zbv, scenario::Schedule::dualpipev}) {
    scenario::StrategySpec st;
    st.schedule = schedule;
    try {
      runtime::check_runtime_strategy(st);
      FAIL() << "accepted " << scenario::to_string(schedule);
    } catch (const SpecError& e) {
      EXPECT_EQ(e.path(), "strategy.schedule");
    }
  }
}

}  // namespace
}  // namespace stratagem::test
