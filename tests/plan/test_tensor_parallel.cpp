// Tensor and sequence parallelism: Megatron-LM's rank order and groups, the TP collectives a
// block issues per phase (bytes and kinds), per-rank shapes and Korthikanti et al.'s activation
// table, and the simulated plan (fold == no-fold, analytic == simulated memory on the
// shipped TP scenarios is in tests/memory/test_plan_agreement.cpp).
#include <gtest/gtest.h>

#include <map>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/tensor_shapes.hpp"
#include "engine/workload/tp_chain.hpp"
#include "sim/simulator.hpp"
#include "tests/plan/plan_test_util.hpp"

namespace stratagem {
namespace {

using plan::CollectiveKind;
using plan::Phase;

using test::group_named;

TEST(TensorParallel, MeshFollowsMegatronRankOrder) {
  // tp 2 × dp 2 × pp 2 on 8 GPUs: Megatron's parallel_state gives TP groups [0,1] [2,3] [4,5]
  // [6,7], DP groups [0,2] [1,3] [4,6] [5,7] and pipelines [0,4] [1,5] [2,6] [3,7].
  const auto s = test::small_scenario(
      {{"dp", 2}, {"tp", 2}, {"pp", 2}, {"grad_accum", 2}, {"mixed_precision", "bf16"}});
  const auto p = plan::build_plan(s, {.fold = false});
  ASSERT_EQ(p.layout.world, 8);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(p.layout.coords[r].tp, r % 2);
    EXPECT_EQ(p.layout.coords[r].dp, (r / 2) % 2);
    EXPECT_EQ(p.layout.coords[r].stage, r / 4);
    EXPECT_EQ(p.layout.rank_of(r / 4, (r / 2) % 2, r % 2), r);
  }
  EXPECT_EQ(group_named(p, "tp(stage 0, dp 0)").ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(group_named(p, "tp(stage 0, dp 1)").ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(group_named(p, "tp(stage 1, dp 0)").ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(group_named(p, "tp(stage 1, dp 1)").ranks, (std::vector<int>{6, 7}));
  EXPECT_EQ(group_named(p, "dp(stage 0, tp 0)").ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(group_named(p, "dp(stage 0, tp 1)").ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(group_named(p, "dp(stage 1, tp 0)").ranks, (std::vector<int>{4, 6}));
  EXPECT_EQ(group_named(p, "dp(stage 1, tp 1)").ranks, (std::vector<int>{5, 7}));
  // Pipeline peers: every send of rank r on stage 0 goes to r + 4.
  for (const auto& op : p.ops) {
    if (const auto* t = std::get_if<plan::P2P>(&op.payload)) {
      EXPECT_EQ(t->peer, op.rank < 4 ? op.rank + 4 : op.rank - 4);
    }
  }
}

struct BlockCollectives {
  std::map<std::pair<Phase, CollectiveKind>, int> count;
  std::map<std::pair<Phase, CollectiveKind>, double> bytes;
};

// The TP collectives of unit `u` on rank 0, keyed by the phase of the compute before them.
BlockCollectives tp_collectives(const plan::StepPlan& p, int u) {
  BlockCollectives out;
  Phase phase = Phase::forward;
  for (const auto& op : p.ops) {
    if (op.rank != 0) continue;
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) phase = c->phase;
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c || c->purpose != plan::CommPurpose::tensor_parallel || c->unit_begin != u) continue;
    EXPECT_EQ(op.stream, plan::Stream::tp);
    out.count[{phase, c->kind}] += 1;
    out.bytes[{phase, c->kind}] += c->bytes;
  }
  return out;
}

TEST(TensorParallel, BlockCollectivesPerPhaseWithoutAndWithSequenceParallelism) {
  // s 1024, b 1, h 1024, bf16: the s·b·h activation is 2 MiB.
  const double act = 1024.0 * 1 * 1024 * 2;
  nlohmann::json strategy = {{"dp", 4}, {"tp", 2}, {"grad_accum", 1}, {"mixed_precision", "bf16"}};
  const auto p = plan::build_plan(test::small_scenario(strategy));
  const auto b = tp_collectives(p, 3);  // block 3
  using K = CollectiveKind;
  EXPECT_EQ(b.count.at({Phase::forward, K::all_reduce}), 2);
  EXPECT_DOUBLE_EQ(b.bytes.at({Phase::forward, K::all_reduce}), 2 * act);
  EXPECT_EQ(b.count.at({Phase::backward, K::all_reduce}), 2);
  EXPECT_DOUBLE_EQ(b.bytes.at({Phase::backward, K::all_reduce}), 2 * act);
  EXPECT_EQ(b.count.size(), 2u);

  strategy["sequence_parallel"] = true;
  const auto q = plan::build_plan(test::small_scenario(strategy));
  const auto c = tp_collectives(q, 3);
  for (Phase ph : {Phase::forward, Phase::backward}) {
    EXPECT_EQ(c.count.at({ph, K::all_gather}), 2);
    EXPECT_EQ(c.count.at({ph, K::reduce_scatter}), 2);
    EXPECT_DOUBLE_EQ(c.bytes.at({ph, K::all_gather}), 2 * act);
    EXPECT_DOUBLE_EQ(c.bytes.at({ph, K::reduce_scatter}), 2 * act);
  }
  EXPECT_EQ(c.count.size(), 4u);
  // Embedding: an all-reduce forward; with SP and learned positions still an all-reduce (then
  // + positions and a split, as Megatron-core), a reduce-scatter without them; the backward
  // all-gathers under SP.
  EXPECT_EQ(tp_collectives(p, 0).count.at({Phase::forward, K::all_reduce}), 1);
  EXPECT_EQ(tp_collectives(p, 0).count.size(), 1u);
  EXPECT_EQ(tp_collectives(q, 0).count.at({Phase::forward, K::all_reduce}), 1);
  EXPECT_EQ(tp_collectives(q, 0).count.at({Phase::backward, K::all_gather}), 1);
  auto rotary = test::small_scenario(strategy);
  rotary.model.positions = scenario::PositionKind::rotary;
  const auto r = tp_collectives(plan::build_plan(rotary), 0);
  EXPECT_EQ(r.count.at({Phase::forward, K::reduce_scatter}), 1);
  EXPECT_EQ(r.count.at({Phase::backward, K::all_gather}), 1);
  EXPECT_EQ(r.count.size(), 2u);
  // Head: three fp32 all-reduces of s·b values (vocab-parallel cross-entropy) and the input
  // gradient's all-reduce in backward.
  const auto head = tp_collectives(p, 17);
  EXPECT_EQ(head.count.at({Phase::forward, K::all_reduce}), 3);
  EXPECT_DOUBLE_EQ(head.bytes.at({Phase::forward, K::all_reduce}), 3 * 1024.0 * 4);
  EXPECT_EQ(head.count.at({Phase::backward, K::all_reduce}), 1);
  EXPECT_DOUBLE_EQ(head.bytes.at({Phase::backward, K::all_reduce}), act);
}

TEST(TensorParallel, ComputeAndParametersSplitOverTheGroup) {
  nlohmann::json strategy = {{"dp", 8}, {"grad_accum", 1}, {"mixed_precision", "bf16"}};
  const auto one = plan::build_plan(test::small_scenario(strategy));
  strategy["dp"] = 4;
  strategy["tp"] = 2;
  const auto two = plan::build_plan(test::small_scenario(strategy));
  // Every model FLOP of a rank halves (the vocabulary 32000 needs no padding for tp 2).
  auto block_flops = [](const plan::StepPlan& p) {
    double f = 0;
    for (const auto& op : p.ops) {
      const auto* c = std::get_if<plan::Compute>(&op.payload);
      if (op.rank == 0 && c && c->phase != Phase::optimizer) {
        f += c->flops;
      }
    }
    return f;
  };
  EXPECT_NEAR(block_flops(two), block_flops(one) / 2, block_flops(one) * 1e-12);
  // Block parameters on a TP rank: matrices and column-parallel biases / 2, norms and
  // row-parallel biases whole (h 1024, f 4096, LayerNorm with bias).
  const double h = 1024, f = 4096;
  const double sharded = 4 * h * h + 2 * h * f + 3 * h + f;
  const double whole = 2 * 2 * h + 2 * h;
  EXPECT_DOUBLE_EQ(two.layout.units[1].params, sharded / 2 + whole);
  EXPECT_DOUBLE_EQ(one.layout.units[1].params, sharded + whole);
  // Vocabulary 32000 padded to a multiple of 128·2: 32000 already is; the word table is halved.
  EXPECT_DOUBLE_EQ(two.layout.units[0].params, 32000.0 / 2 * h + 2048 * h);
}

TEST(TensorParallel, KorthikantiTableTwoForGpt3At8) {
  // GPT-3 175B: s 2048, b 1, h 12288, a 96, t 8; s·b·h = 25,165,824 and 5·a·s/h = 80.
  const auto m = scenario::load_scenario("3d-tp8-pp8-gpt3-175b-64xa100").model;
  const double sbh = 2048.0 * 12288;
  auto cell = [&](scenario::Recompute r, bool sp) {
    return scenario::activation_bytes_per_layer(m, 2048, 1, r, 2.0, {8, sp});
  };
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::none, false), sbh * (10 + 24.0 / 8 + 80.0 / 8));
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::none, false), 578813952.0);           // sbh · 23
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::none, true), sbh * (34 + 80.0) / 8);  // sbh · 14.25
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::selective, false), sbh * 13);
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::selective, true), sbh * 34 / 8);
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::full, false), 2 * sbh);
  EXPECT_DOUBLE_EQ(cell(scenario::Recompute::full, true), 2 * sbh / 8);
  // Unsharded (t = 1) the table's first row: s·b·h·(34 + 5·a·s/h).
  EXPECT_DOUBLE_EQ(scenario::activation_bytes_per_layer(m, 2048, 1, scenario::Recompute::none),
                   sbh * 114);
  EXPECT_EQ(scenario::padded_vocab(m, 8), 51200);
  EXPECT_EQ(scenario::padded_vocab(m, 1), 50257);
  // A block on one of 8 TP ranks: (4h² + 2hf + 3h + f)/8 + 2·2h + 2h.
  EXPECT_DOUBLE_EQ(scenario::block_params_tp(m, 8), 226576896.0);
}

TEST(TensorParallel, SequenceParallelNormGradientsAreAllReducedOverTheGroup) {
  const auto s = test::small_scenario({{"dp", 4},
                                       {"tp", 2},
                                       {"sequence_parallel", true},
                                       {"grad_accum", 1},
                                       {"mixed_precision", "bf16"}});
  const auto p = plan::build_plan(s);
  int found = 0;
  for (const auto& op : p.ops) {
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (op.rank != 0 || !c || c->purpose != plan::CommPurpose::sequence_parallel_grads ||
        p.groups[c->group].label != "tp(stage 0, dp 0)") {
      continue;
    }
    ++found;
    // 16 blocks × (2 LayerNorms of 2h + 2 row-parallel biases of h) + the final LayerNorm.
    EXPECT_DOUBLE_EQ(c->bytes, 2.0 * (16 * (4 * 1024 + 2 * 1024) + 2 * 1024));
  }
  EXPECT_EQ(found, 1);
}

// The plan states each piece's place in its unit's chain (what the runtime drives a chain by):
// every split step is its unit's chains in order, contiguous on the rank, each the length and
// the shape workload::TpChains gives; ops outside a chain are unmarked.
TEST(TensorParallel, EachPieceCarriesItsPlaceInItsUnitsChain) {
  const auto s = test::small_scenario({{"dp", 4},
                                       {"tp", 2},
                                       {"sequence_parallel", true},
                                       {"grad_accum", 2},
                                       {"mixed_precision", "bf16"}});
  const auto p = plan::build_plan(s);
  const workload::TpChains chains(s);
  const int head = static_cast<int>(p.layout.units.size()) - 1;
  std::vector<plan::OpId> ids;
  for (const auto& op : p.ops) {
    if (op.rank == 0) ids.push_back(op.id);
  }
  int chains_seen = 0, unmarked = 0;
  for (std::size_t i = 0; i < ids.size();) {
    const plan::Op& first = p.ops[ids[i]];
    if (first.chain.piece < 0) {
      ++unmarked;
      // Outside chains: data-parallel and SP gradient syncs, the optimizer; no TP collective.
      const auto* c = std::get_if<plan::Collective>(&first.payload);
      EXPECT_FALSE(c && c->purpose == plan::CommPurpose::tensor_parallel) << ids[i];
      ++i;
      continue;
    }
    ASSERT_EQ(first.chain.piece, 0) << ids[i];
    // The unit and direction from the chain's first compute piece.
    const plan::Compute* compute = nullptr;
    for (int k = 0; k < first.chain.pieces && !compute; ++k) {
      compute = std::get_if<plan::Compute>(&p.ops[ids[i + k]].payload);
    }
    ASSERT_NE(compute, nullptr);
    const auto& shape = chains.chain(compute->unit_begin, compute->unit_begin == head,
                                     compute->phase != plan::Phase::backward);
    ASSERT_EQ(static_cast<std::size_t>(first.chain.pieces), shape.size());
    for (std::size_t k = 0; k < shape.size(); ++k) {
      const plan::Op& op = p.ops[ids[i + k]];
      EXPECT_EQ(op.chain.piece, static_cast<int>(k));
      EXPECT_EQ(op.chain.pieces, first.chain.pieces);
      const auto* c = std::get_if<plan::Collective>(&op.payload);
      EXPECT_EQ(c != nullptr, shape[k].collective) << "piece " << k;
      if (c) {
        EXPECT_EQ(c->kind, shape[k].kind) << "piece " << k;
      }
    }
    ++chains_seen;
    i += shape.size();
  }
  // Embedding, 16 blocks and the head, forward and backward, on 2 micro-batches.
  EXPECT_EQ(chains_seen, 2 * 2 * 18);
  EXPECT_GT(unmarked, 0);
}

TEST(TensorParallel, MegatronReducesInputGradientsBesideTheWeightGradient) {
  // Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication and TE's LayerNormLinear:
  // dgrad GEMM, async all-reduce (SP: reduce-scatter) of the input gradient, wgrad GEMM,
  // wait, norm backward. Same collectives and work as the eager stack, less of it exposed.
  for (const bool sp : {false, true}) {
    SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
    nlohmann::json strategy = {{"dp", 1},
                               {"tp", 2},
                               {"sequence_parallel", sp},
                               {"grad_accum", 2},
                               {"mixed_precision", "bf16"}};
    const auto eager = test::small_scenario(strategy, 2);
    strategy["stack"] = "megatron";
    const auto megatron = test::small_scenario(strategy, 2);
    EXPECT_FALSE(workload::tp_overlap(eager.strategy).reduce_beside_wgrad);
    EXPECT_TRUE(workload::tp_overlap(megatron.strategy).reduce_beside_wgrad);
    EXPECT_FALSE(workload::tp_overlap(megatron.strategy).async);
    // The chain's shares still sum to the whole unit, and only the block's backward changes.
    const workload::TpChains a(eager), b(megatron);
    for (const bool forward : {false, true}) {
      double flops = 0, bytes = 0, attention = 0;
      for (const auto& piece : b.chain(1, false, forward)) {
        EXPECT_GE(piece.flops_share, 0.0);
        EXPECT_GE(piece.bytes_share, 0.0);
        flops += piece.flops_share;
        bytes += piece.bytes_share;
        attention += piece.attention_share;
      }
      EXPECT_NEAR(flops, 1.0, 1e-12);
      EXPECT_NEAR(bytes, 1.0, 1e-12);
      EXPECT_NEAR(attention, 1.0, 1e-12);
    }
    EXPECT_EQ(a.chain(1, false, true).size(), b.chain(1, false, true).size());
    EXPECT_EQ(b.chain(1, false, false).size(), a.chain(1, false, false).size() + (sp ? 4u : 3u));
    const auto pa = plan::build_plan(eager), pb = plan::build_plan(megatron);
    EXPECT_EQ(tp_collectives(pa, 3).bytes, tp_collectives(pb, 3).bytes);
    // Each backward reduction of a block: the piece after it waits for what it waits for, and
    // the piece after that for both.
    int beside = 0;
    std::vector<plan::OpId> ids;
    for (const auto& op : pb.ops) {
      if (op.rank == 0) ids.push_back(op.id);
    }
    auto deps = [&](plan::OpId id) {
      const auto d = pb.deps_of(pb.ops[id]);
      return std::vector<plan::OpId>(d.begin(), d.end());
    };
    for (std::size_t i = 0; i + 2 < ids.size(); ++i) {
      const auto* c = std::get_if<plan::Collective>(&pb.ops[ids[i]].payload);
      if (!c || c->purpose != plan::CommPurpose::tensor_parallel) continue;
      const auto* w = std::get_if<plan::Compute>(&pb.ops[ids[i + 1]].payload);
      const bool block_backward = w && w->phase == Phase::backward &&
                                  w->unit_begin == c->unit_begin && c->unit_begin > 0 &&
                                  c->unit_begin < static_cast<int>(pb.layout.units.size()) - 1;
      if (!block_backward || c->kind == CollectiveKind::all_gather) continue;
      ++beside;
      EXPECT_EQ(deps(ids[i + 1]), deps(ids[i]));
      const auto after = deps(ids[i + 2]);
      EXPECT_NE(std::find(after.begin(), after.end(), ids[i]), after.end());
      EXPECT_NE(std::find(after.begin(), after.end(), ids[i + 1]), after.end());
    }
    EXPECT_EQ(beside, 2 * 16 * 2);  // two per block backward, 16 blocks, 2 micro-batches
    // Hidden behind the weight gradients: less exposed communication, the same total bytes.
    const auto ra = sim::Simulator().run(pa, sim::make_cost_models(eager));
    const auto rb = sim::Simulator().run(pb, sim::make_cost_models(megatron));
    EXPECT_EQ(ra.metrics.comm_bytes, rb.metrics.comm_bytes);
    EXPECT_LT(rb.metrics.exposed_comm_s, 0.9 * ra.metrics.exposed_comm_s);
  }
}

TEST(TensorParallel, AsyncTpRunsEachGatherAndReduceScatterBesideItsGemm) {
  // PyTorch's async TP (fused_all_gather_matmul, fused_matmul_reduce_scatter) and Megatron's
  // tp_comm_overlap: the block's all-gathers and reduce-scatters beside their GEMMs.
  for (const std::string stack : {"pytorch", "megatron"}) {
    SCOPED_TRACE(stack);
    nlohmann::json strategy = {{"dp", 1},
                               {"tp", 2},
                               {"sequence_parallel", true},
                               {"stack", stack},
                               {"compile", stack == "pytorch"},
                               {"grad_accum", 2},
                               {"mixed_precision", "bf16"}};
    const auto plain = test::small_scenario(strategy, 2);
    strategy["async_tp"] = true;
    const auto async = test::small_scenario(strategy, 2);
    EXPECT_TRUE(workload::tp_overlap(async.strategy).async);
    EXPECT_TRUE(workload::tp_overlap(async.strategy).reduce_beside_wgrad);
    const workload::TpChains chains(async);
    for (const bool forward : {false, true}) {
      double flops = 0, bytes = 0, attention = 0;
      int beside = 0;
      const auto& chain = chains.chain(1, false, forward);
      for (std::size_t k = 0; k < chain.size(); ++k) {
        const auto& piece = chain[k];
        EXPECT_GE(piece.flops_share, -1e-15) << k;
        EXPECT_GE(piece.bytes_share, -1e-15) << k;
        flops += piece.flops_share;
        bytes += piece.bytes_share;
        attention += piece.attention_share;
        if (piece.collective) {
          EXPECT_TRUE(piece.alongside) << k;  // every one of them
          ++beside;
          // The piece beside it is a GEMM alone; the one after it joins both.
          ASSERT_LT(k + 2, chain.size());
          EXPECT_FALSE(chain[k + 1].collective);
          EXPECT_GT(chain[k + 1].flops_share, 0);
          EXPECT_EQ(chain[k + 1].bytes_share, 0);
          EXPECT_FALSE(chain[k + 2].collective);
        }
      }
      EXPECT_EQ(beside, 4);
      EXPECT_NEAR(flops, 1.0, 1e-12);
      EXPECT_NEAR(bytes, 1.0, 1e-12);
      EXPECT_NEAR(attention, 1.0, 1e-12);
    }
    const auto pa = plan::build_plan(plain), pb = plan::build_plan(async);
    EXPECT_EQ(tp_collectives(pa, 3).bytes, tp_collectives(pb, 3).bytes);
    const auto ra = sim::Simulator().run(pa, sim::make_cost_models(plain));
    const auto rb = sim::Simulator().run(pb, sim::make_cost_models(async));
    EXPECT_EQ(ra.metrics.comm_bytes, rb.metrics.comm_bytes);
    EXPECT_LT(rb.metrics.exposed_comm_s, 0.8 * ra.metrics.exposed_comm_s);
    EXPECT_LT(rb.metrics.step_time_s, ra.metrics.step_time_s);
  }
}

TEST(TensorParallel, AsyncTpNeedsSequenceParallelismAndAStackThatHasIt) {
  auto path = [](nlohmann::json strategy) {
    strategy["tp"] = 2;
    strategy["async_tp"] = true;
    try {
      test::small_scenario(strategy, 2);
    } catch (const SpecError& e) {
      return e.path();
    }
    return std::string();
  };
  EXPECT_EQ(path({{"stack", "megatron"}}), "strategy.async_tp");        // no SP
  EXPECT_EQ(path({{"sequence_parallel", true}}), "strategy.async_tp");  // eager: needs compile
  EXPECT_EQ(path({{"sequence_parallel", true}, {"stack", "deepspeed"}, {"compile", true}}),
            "strategy.async_tp");
  EXPECT_EQ(path({{"sequence_parallel", true}, {"stack", "megatron-legacy"}}), "strategy.async_tp");
  EXPECT_EQ(path({{"sequence_parallel", true}, {"compile", true}}), "");
  EXPECT_EQ(path({{"sequence_parallel", true}, {"stack", "megatron"}}), "");
}

TEST(TensorParallel, FoldedAndUnfoldedAgreeAndSimulationIsDeterministic) {
  for (bool sp : {false, true}) {
    const auto s = test::small_scenario({{"dp", 2},
                                         {"tp", 2},
                                         {"pp", 2},
                                         {"sequence_parallel", sp},
                                         {"grad_accum", 4},
                                         {"sharding", "zero1"},
                                         {"mixed_precision", "bf16"}});
    const auto folded = plan::build_plan(s);
    const auto full = plan::build_plan(s, {.fold = false});
    EXPECT_TRUE(folded.folded);
    EXPECT_EQ(folded.built_ranks().size(), 2u);  // (dp 0, tp 0) of each stage
    const auto models = sim::make_cost_models(s);
    const auto a = sim::Simulator().run(folded, models);
    const auto b = sim::Simulator().run(full, models);
    EXPECT_DOUBLE_EQ(a.metrics.step_time_s, b.metrics.step_time_s);
    for (int r = 0; r < 8; ++r) {
      EXPECT_DOUBLE_EQ(a.resolved(r).peak_memory_bytes, b.ranks[r].peak_memory_bytes);
    }
    EXPECT_EQ(result::to_json(a).dump(),
              result::to_json(sim::Simulator().run(folded, models)).dump());
  }
}

// The JSON path of the SpecError that parsing (and, with `build`, planning) `j` raises; "" if
// none.
std::string error_path_of(const nlohmann::json& j, bool build = false) {
  try {
    const auto s = scenario::parse_scenario(j);
    if (build) plan::build_plan(s);
  } catch (const SpecError& e) {
    return e.path();
  }
  return "";
}

std::string error_path(const nlohmann::json& strategy, int gpus = 8,
                       const nlohmann::json& training = {{"seq_len", 1024}}) {
  nlohmann::json j = {
      {"name", "t"},
      {"model", {{"layers", 16}, {"hidden", 1024}, {"heads", 16}, {"vocab", 32000}}},
      {"cluster", {{"preset", "dgx-a100-80gb"}, {"gpus_per_node", gpus}}},
      {"strategy", strategy},
      {"training", training}};
  return error_path_of(j);
}

TEST(TensorParallel, TheMeshIsValidatedInOnePlaceWithJsonPaths) {
  EXPECT_EQ(error_path({{"dp", 4}, {"tp", 2}}), "");
  EXPECT_EQ(error_path({{"dp", 8}, {"tp", 2}}), "strategy.dp");     // 16 ≠ 8 GPUs
  EXPECT_EQ(error_path({{"dp", 2}, {"tp", 3}}, 6), "strategy.tp");  // 3 ∤ 16 heads
  EXPECT_EQ(error_path({{"dp", 1}, {"tp", 16}}, 16), "");
  EXPECT_EQ(error_path({{"dp", 1}, {"tp", 8}, {"pp", 2}}), "strategy.dp");  // 16 ≠ 8
  EXPECT_EQ(error_path({{"dp", 8}, {"sequence_parallel", true}}), "strategy.sequence_parallel");
  EXPECT_EQ(error_path({{"dp", 2}, {"tp", 4}, {"sequence_parallel", true}}, 8, {{"seq_len", 1022}}),
            "training.seq_len");
  // A TP group spanning nodes: 2 nodes of 4 GPUs, tp 8.
  nlohmann::json j = {
      {"name", "t"},
      {"model", {{"layers", 16}, {"hidden", 1024}, {"heads", 16}, {"vocab", 32000}}},
      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 2}, {"gpus_per_node", 4}}},
      {"strategy", {{"dp", 1}, {"tp", 8}}}};
  try {
    scenario::parse_scenario(j);
    ADD_FAILURE() << "a TP group across nodes was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.tp");
    EXPECT_NE(std::string(e.what()).find("gpus_per_node"), std::string::npos) << e.what();
  }
  // HYBRID_SHARD with one data-parallel rank of a TP index per node.
  j["strategy"] = {{"dp", 2}, {"tp", 4}, {"sharding", "HYBRID_SHARD"}};
  EXPECT_EQ(error_path_of(j), "strategy.sharding");
  // A quick-form model has no heads or MLP to split.
  j = {{"name", "t"},
       {"model", {{"params", 7e9}, {"layers", 32}}},
       {"cluster", "dgx-a100-80gb"},
       {"strategy", {{"dp", 4}, {"tp", 2}}}};
  EXPECT_EQ(error_path_of(j), "strategy.tp");
}

// Counts that size a plan are capped, derived ones too, and a plan too large to hold is one
// clear error naming the key, not an allocation failure.
TEST(PlanSize, MicroBatchCapsAndPlanSizeAreCheckedUpFront) {
  auto path_of = [](const nlohmann::json& strategy, const nlohmann::json& training) {
    return error_path_of({{"model", "gpt3-175b"},
                          {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 8}}},
                          {"strategy", strategy},
                          {"training", training}},
                         true);
  };
  const nlohmann::json seq = {{"seq_len", 2048}};
  EXPECT_EQ(path_of({{"dp", 64}, {"grad_accum", scenario::kMaxMicroBatches + 1}}, seq),
            "strategy.grad_accum");
  EXPECT_EQ(path_of({{"dp", 64}}, {{"seq_len", 2048}, {"global_batch", std::int64_t{1} << 33}}),
            "training.global_batch");  // derived: 2^27 micro-batches
  EXPECT_EQ(
      path_of({{"dp", 1}, {"tp", 8}, {"pp", 8}, {"grad_accum", 65536}, {"recompute", "selective"}},
              seq),
      "strategy.grad_accum");  // ~1.8e8 ops
  EXPECT_EQ(path_of({{"dp", 1}, {"tp", 8}, {"pp", 8}, {"grad_accum", 64}}, seq), "");
  // dp × pp beyond int is a mismatch, not a wrap-around to the cluster's size.
  nlohmann::json j = {{"model", "gpt2"},
                      {"cluster", "dgx-a100-80gb"},
                      {"strategy", {{"dp", 12132676}, {"pp", 354}}}};
  EXPECT_EQ(error_path_of(j), "strategy.dp");
}

}  // namespace
}  // namespace stratagem

namespace stratagem {
namespace {

// Megatron-LM's scatter/gather in the pipeline (stack megatron-legacy, TP without sequence
// parallelism): each TP rank sends its 1/tp share of s·b·h and the receiving stage
// all-gathers the shares over its TP group; the other stacks send the whole replicated tensor,
// and sequence parallelism's message is already the 1/tp slice.
TEST(TensorParallel, MegatronLmScattersPipelineMessagesAcrossTheTpGroup) {
  auto messages = [](const char* stack, bool sp) {
    nlohmann::json st = {{"dp", 1},
                         {"tp", 4},
                         {"pp", 2},
                         {"grad_accum", 2},
                         {"mixed_precision", "bf16"},
                         {"stack", stack},
                         {"sequence_parallel", sp}};
    const auto s = test::small_scenario(st);
    const auto p = plan::build_plan(s, {.fold = false});
    std::pair<double, int> first{0, 0};
    for (const auto& op : p.ops) {
      if (const auto* t = std::get_if<plan::P2P>(&op.payload)) {
        first = {t->bytes, t->gather};
        EXPECT_EQ(p.transfers[t->transfer].gather, t->gather);
        break;
      }
    }
    return first;
  };
  const double full = 1024.0 * 1024 * 2;  // s·b·h in bf16
  const auto legacy = messages("megatron-legacy", false);
  EXPECT_DOUBLE_EQ(legacy.first, full / 4);
  EXPECT_EQ(legacy.second, 4);
  const auto eager = messages("pytorch", false);
  EXPECT_DOUBLE_EQ(eager.first, full);
  EXPECT_EQ(eager.second, 1);
  const auto sp = messages("megatron-legacy", true);
  EXPECT_DOUBLE_EQ(sp.first, full / 4);
  EXPECT_EQ(sp.second, 1);
  // Its cost: NetworkModel.ScatteredP2pIsTheShareThenTheTpGroupsAllGather (tests/sim).
}

}  // namespace
}  // namespace stratagem
