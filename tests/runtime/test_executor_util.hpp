#pragma once
// Helpers for executor tests: a tiny GPT scenario on a CPU "cluster" of n ranks, and training
// it with one thread per rank over the in-process communicator.
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "engine/comm/inproc_communicator.hpp"
#include "engine/runtime/threads.hpp"
#include "engine/runtime/worker.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::test {

/// 4 layers, hidden 32, 4 heads, vocab 64, seq 16: small enough for 2 cores, big enough for
/// every unit to have real matrices. `strategy` is merged over {dp, pp = 1}.
inline scenario::Scenario tiny_scenario(int world, const nlohmann::json& strategy,
                                        const nlohmann::json& model = {}, int global_batch = 8,
                                        int nodes = 1) {
  nlohmann::json m = {
      {"name", "tiny-gpt"}, {"layers", 4},         {"hidden", 32},      {"heads", 4},
      {"vocab", 64},        {"max_positions", 16}, {"ffn_hidden", 128}, {"tied_embeddings", false}};
  for (const auto& [k, v] : model.items()) m[k] = v;
  nlohmann::json st = {{"dp", 1}, {"pp", 1}};
  for (const auto& [k, v] : strategy.items()) st[k] = v;
  // The cluster only sizes memory in results; the executor never reads its speeds.
  nlohmann::json j = {{"name", "tiny"},
                      {"model", m},
                      {"cluster",
                       {{"nodes", nodes},
                        {"gpus_per_node", world / nodes},
                        {"gpu",
                         {{"name", "test-cpu"},
                          {"memory_GiB", 1},
                          {"peak_tflops", {{"fp32", 0.1}}},
                          {"hbm_GBps", 10}}},
                        {"intra_node", {{"bandwidth_GBps", 10}}},
                        {"inter_node", {{"bandwidth_GBps", 1}}}}},
                      {"strategy", st},
                      {"training", {{"seq_len", 16}, {"global_batch", global_batch}, {"seed", 7}}}};
  return scenario::parse_scenario(j, "tiny");
}

struct InprocRun {
  std::vector<std::unique_ptr<runtime::Trainer>> trainers;
  std::vector<runtime::TrainResult> results;

  /// Unit `u`'s full parameters as fp32 on the CPU, reassembled from the shards when sharded
  /// and, under tensor parallelism, from the TP ranks' slices (the vocabulary padding cut
  /// off), in the layout of tp = 1.
  at::Tensor unit_params(int u) {
    std::vector<at::Tensor> by_tp;  // the unit's flat parameters on TP index 0, 1, ...
    const runtime::UnitLayout* layout = nullptr;
    for (std::size_t r = 0; r < trainers.size(); ++r) {
      auto& ex = trainers[r]->executor();
      const int tp_index = ex.plan().layout.coords[r].tp;
      if (tp_index != static_cast<int>(by_tp.size())) continue;
      at::Tensor flat = rank_unit_params(static_cast<int>(r), u);
      if (!flat.defined()) continue;
      if (by_tp.empty()) layout = &ex.units().layout(u);
      by_tp.push_back(flat);
      if (static_cast<int>(by_tp.size()) == ex.plan().layout.tp) break;
    }
    if (by_tp.empty()) throw std::runtime_error("no rank owns unit " + std::to_string(u));
    if (by_tp.size() == 1) return by_tp[0];
    std::vector<at::Tensor> parts;
    for (const auto& slot : layout->slots) {
      auto piece = [&](const at::Tensor& flat) {
        return flat.narrow(0, slot.offset, slot.numel).view(slot.shape);
      };
      at::Tensor whole = piece(by_tp[0]);
      if (slot.shard_dim >= 0) {
        std::vector<at::Tensor> slices;
        for (const auto& f : by_tp) slices.push_back(piece(f));
        whole = at::cat(slices, slot.shard_dim);
      }
      if (slot.drawn_rows >= 0) whole = whole.narrow(0, 0, slot.drawn_rows);
      parts.push_back(whole.reshape({-1}));
    }
    return at::cat(parts);
  }

  /// Rank `r`'s flat parameters of unit `u` (undefined if it does not own it), its DP
  /// shards reassembled.
  at::Tensor rank_unit_params(int r, int u) {
    auto& t = trainers[static_cast<std::size_t>(r)];
    auto& state = t->executor().state();
    const auto& layout = state.layout();
    if (u >= static_cast<int>(layout.segment_of_unit.size()) || layout.segment_of_unit[u] < 0) {
      return at::Tensor();
    }
    if (!layout.params_sharded) return state.unit_params(u).to(at::kFloat).clone();
    const int s = layout.segment_of_unit[u];
    std::vector<at::Tensor> shards;
    for (int q : layout.segments[s].shard_group) {
      shards.push_back(trainers[q]->executor().state().params_shard(s));
    }
    return at::cat(shards)
        .narrow(0, layout.offset_in_segment(u), t->executor().units().numel(u))
        .to(at::kFloat);
  }
};

/// Trains `s` with one thread per rank; rethrows the first rank's exception.
inline InprocRun run_inproc(const scenario::Scenario& s, runtime::TrainOptions options) {
  runtime::set_cpu_threads(1);
  const int n = s.world_size();
  auto comms = comm::make_inproc_world(n, std::chrono::seconds(60));
  InprocRun run;
  run.trainers.resize(n);
  run.results.resize(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        run.trainers[r] = std::make_unique<runtime::Trainer>(s, *comms[r], options);
        run.results[r] = run.trainers[r]->run();
      } catch (...) {
        errors[r] = std::current_exception();
        if (auto* c = dynamic_cast<comm::InprocCommunicator*>(comms[r].get())) {
          c->fail("rank " + std::to_string(r) + " threw");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return run;
}

/// Every rank's per-step losses of `run` within `rel` (relative) of `ref`.
inline void expect_same_losses(const InprocRun& run, const std::vector<double>& ref, double rel) {
  for (std::size_t r = 0; r < run.results.size(); ++r) {
    ASSERT_EQ(run.results[r].losses.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(run.results[r].losses[i], ref[i], rel * std::abs(ref[i]))
          << "rank " << r << " step " << i;
    }
  }
}

/// Every unit's parameters of `run` (scenario `s`) within `tolerance` of `ref` (one process);
/// the head's copy of tied word embeddings (pipelines) must equal the embedding's.
inline void expect_same_params(InprocRun& run, const std::vector<at::Tensor>& ref,
                               const scenario::Scenario& s, double tolerance) {
  const int head = static_cast<int>(ref.size()) - 1;
  for (int u = 0; u <= head; ++u) {
    at::Tensor got = run.unit_params(u);
    if (u == head && got.numel() > ref[u].numel()) {
      const std::int64_t own = ref[u].numel();
      const std::int64_t table = s.model.vocab * s.model.hidden;
      const double copy_diff =
          (got.narrow(0, own, table) - ref[0].narrow(0, 0, table)).abs().max().item<double>();
      EXPECT_LE(copy_diff, tolerance) << "the head's copy of the word embeddings";
      got = got.narrow(0, 0, own);
    }
    ASSERT_EQ(got.numel(), ref[u].numel()) << "unit " << u;
    EXPECT_LE((got - ref[u]).abs().max().item<double>(), tolerance) << "unit " << u;
  }
}

/// AdamW at lr 1e-3: Adam turns rounding noise in gradients that are zero in exact arithmetic
/// (the attention key bias, which softmax cancels) into updates of about lr·|g|/eps, so the
/// learning rate bounds how far two summation orders can drift apart.
inline runtime::TrainOptions train_options(int steps, double lr = 1e-3) {
  runtime::TrainOptions o;
  o.steps = steps;
  o.optimizer = runtime::OptimizerConfig::defaults(scenario::Optimizer::adamw, lr);
  o.timeout = std::chrono::seconds(60);
  return o;
}

struct Reference {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
};

/// One process, 4 micro-batches of 2 (the global batch of 8 the strategy tests split) of the
/// tiny model with `model`'s keys, trained `steps` steps: its losses and unit parameters.
inline const Reference& one_process(const nlohmann::json& model, int steps) {
  static std::map<std::string, Reference> cache;
  auto& ref = cache[model.dump() + "/" + std::to_string(steps)];
  if (ref.losses.empty()) {
    auto s = tiny_scenario(1, {{"micro_batch_size", 2}, {"grad_accum", 4}}, model);
    auto run = run_inproc(s, train_options(steps));
    ref.losses = run.results[0].losses;
    for (int u = 0; u < static_cast<int>(s.model.layers) + 2; ++u) {
      ref.params.push_back(run.unit_params(u));
    }
  }
  return ref;
}

}  // namespace stratagem::test
