#include "tune/search.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <thread>

#include "engine/memory/memory.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/strategy_rewrite.hpp"
#include "engine/workload/stages.hpp"
#include "engine/workload/tp_chain.hpp"
#include "engine/workload/units.hpp"
#include "sim/simulate.hpp"

namespace stratagem::tune {

namespace {

std::vector<scenario::Scenario> enumerate(const scenario::Scenario& base, const SearchOptions& o,
                                          int& invalid) {
  using scenario::Schedule;
  using scenario::Sharding;
  const int world = base.cluster.world_size();
  std::vector<scenario::Scenario> out;
  // Tensor parallelism inside a node (divisors of gpus_per_node), with and without sequence
  // parallelism; the mesh validation drops degrees the model's heads or ffn do not allow.
  std::vector<std::pair<int, bool>> tensor;
  const int domain = base.cluster.domain_gpus();
  for (int tp = 1; tp <= domain; ++tp) {
    if (domain % tp != 0) continue;
    tensor.push_back({tp, false});
    if (scenario::sequence_parallel_allowed(tp)) tensor.push_back({tp, true});
  }
  std::vector<scenario::Precision> precisions = o.precisions;
  if (o.fp8_when_available && base.cluster.gpu.peak_fp8 > 0 &&
      std::find(precisions.begin(), precisions.end(), scenario::Precision::fp8) ==
          precisions.end()) {
    precisions.push_back(scenario::Precision::fp8);
  }
  const bool long_context = o.context_parallel_from_seq_len > 0 &&
                            base.training.seq_len >= o.context_parallel_from_seq_len;
  for (const auto& [tp, sp] : tensor) {
    std::vector<int> contexts = {1};
    for (int cp = 2; long_context && cp <= world / tp; cp *= 2) {
      if ((world / tp) % cp == 0) contexts.push_back(cp);
    }
    for (int cp : contexts) {
      const int ranks = world / tp / cp;  // per (tensor, context)-parallel index
      for (int pp = 1; pp <= std::min(ranks, o.max_pp); ++pp) {
        if (ranks % pp != 0 || pp > base.model.layers) continue;
        const int dp = ranks / pp;
        std::vector<std::pair<Schedule, int>> schedules = {{Schedule::one_f_one_b, 1}};
        if (pp > 1) {
          // The zero-bubble schedules as PyTorch ships them (ZB-H1 and ZB-V; interleaved-zb
          // only when asked for in a scenario).
          schedules = {{Schedule::gpipe, 1},
                       {Schedule::one_f_one_b, 1},
                       {Schedule::interleaved, 2},
                       {Schedule::zb_h1, 1},
                       {Schedule::zbv, 2}};
        }
        // Sharding over one data-parallel replica shards nothing: with dp × cp 1 only `none`.
        const int replicas = dp * cp;
        std::vector<Sharding> shardings = {Sharding::none};
        if (replicas > 1) shardings.push_back(Sharding::zero1);
        if (pp == 1 && replicas > 1) {
          shardings.insert(shardings.end(),
                           {Sharding::zero2, Sharding::zero3, Sharding::fsdp_shard_grad_op});
          if (base.cluster.nodes > 1) shardings.push_back(Sharding::fsdp_hybrid_shard);
        }
        // MoE: expert parallelism over the divisors of the experts that divide a stage's
        // dp × cp × tp ranks (etp 1, as Megatron-Bridge's MoE recipes; expert_mesh.hpp).
        std::vector<int> expert_degrees = {1};
        if (base.model.moe) {
          const std::int64_t experts = base.model.moe->experts;
          for (int ep = 2; ep <= dp * cp * tp; ++ep) {
            if (experts % ep == 0 && (dp * cp * tp) % ep == 0) expert_degrees.push_back(ep);
          }
        }
        for (int mbs = 1; mbs <= o.max_micro_batch_size; mbs *= 2) {
          const auto accum = scenario::grad_accum_for(base.training.global_batch, mbs, dp);
          if (!accum) continue;
          const int m = static_cast<int>(*accum);
          for (const auto& [schedule, chunks] : schedules) {
            for (Sharding sharding : shardings) {
              for (scenario::Precision precision : precisions) {
                for (scenario::Attention attention : o.attentions) {
                  for (scenario::Recompute recompute : o.recomputes) {
                    // Selective recomputation is none with flash attention: not listed twice.
                    if (recompute == scenario::Recompute::selective &&
                        attention == scenario::Attention::flash) {
                      continue;
                    }
                    // torchtitan's per-op policy belongs to its stack: not enumerated for others.
                    if (recompute == scenario::Recompute::selective_op &&
                        base.strategy.stack != scenario::Stack::pytorch) {
                      continue;
                    }
                    scenario::Scenario s = base;
                    auto& st = s.strategy;
                    st = scenario::StrategySpec{};
                    st.dp = dp;
                    st.pp = pp;
                    st.tp = tp;
                    st.cp = cp;
                    st.sequence_parallel = sp;
                    st.schedule = schedule;
                    st.chunks = chunks;
                    st.micro_batch_size = mbs;
                    st.grad_accum = m;
                    st.sharding = sharding;
                    st.precision = precision;
                    // torchao's float8 all-gather wherever FSDP gathers (torchtitan's default).
                    st.fp8_all_gather = scenario::fp8_all_gather_allowed(precision, sharding);
                    st.attention = attention;
                    st.recompute = recompute;
                    st.optimizer = base.strategy.optimizer;
                    st.stack = base.strategy.stack;
                    st.compile = base.strategy.compile;
                    if (precision == scenario::Precision::fp8) {
                      st.fp8_recipe = base.strategy.fp8_recipe;
                    }
                    st.async_tp = base.strategy.async_tp && scenario::async_tp_allowed(st);
                    st.moe_dispatcher = base.strategy.moe_dispatcher;
                    st.moe_load_imbalance = base.strategy.moe_load_imbalance;
                    for (int ep : expert_degrees) {
                      scenario::Scenario e = s;
                      e.strategy.ep = ep;
                      try {
                        scenario::validate(e);
                      } catch (const SpecError&) {
                        ++invalid;
                        continue;
                      }
                      e.name = strategy_label(e);
                      out.push_back(std::move(e));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

std::string strategy_label(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  std::string label = "dp " + std::to_string(st.dp);
  if (st.tp > 1) {
    label += " × tp " + std::to_string(st.tp) + (st.sequence_parallel ? " SP" : "");
  }
  if (st.cp > 1) label += " × cp " + std::to_string(st.cp);
  label += " × pp " + std::to_string(st.pp);
  // The MoE blocks' regrouping of each stage's ranks (expert_mesh.hpp).
  if (st.ep > 1) label += " (ep " + std::to_string(st.ep) + ")";
  if (st.etp > 1) label += " (etp " + std::to_string(st.etp) + ")";
  if (st.pp > 1) {
    label += ", " + std::string(scenario::to_string(st.schedule));
    if (st.schedule == scenario::Schedule::interleaved ||
        st.schedule == scenario::Schedule::interleaved_zb) {
      label += " v" + std::to_string(st.chunks);
    }
  }
  label += ", mbs " + std::to_string(st.micro_batch_size) + " × " + std::to_string(st.grad_accum);
  label += ", " + std::string(scenario::to_string(st.sharding));
  label += ", " + std::string(st.precision == scenario::Precision::no
                                  ? "fp32"
                                  : scenario::to_string(st.precision));
  label += ", recompute " + std::string(scenario::to_string(st.recompute));
  if (st.attention == scenario::Attention::eager) label += ", eager attention";
  return label;
}

namespace {

struct Pending {
  int index = 0;
  double upper_tokens_per_s = 0;  ///< from the compute lower bound
  double analytic_peak = 0;       ///< never above the simulated peak (memory contract)
};

}  // namespace

// A lower bound on a configuration's step time without building its plan. A rank's compute
// stream runs its ops one after another, each at least as long as on an idle device; under the
// roofline an op takes flops / (peak · efficiency(d)) + bytes / HBM bandwidth + launches, linear
// in its FLOPs and bytes, with efficiency rising with the smallest GEMM dimension d (a whole
// chunk's op uses the smallest d of its units, so timing each unit at its own d never
// overestimates; a measured table's curve is bounded by its best point). Tensor-parallel
// collectives sit on the same chain. So stage s needs at least T_s: its forward, backward and
// recompute work over all micro-batches plus its TP collectives that run on the critical
// path, launches, the optimizer and an MoE block's expert-parallel collectives left out. It cannot
// start before the stages ahead ran their first forward (F_j) and the step cannot end before the
// stages ahead ran their last backward (B_j) after it:
//   bound = max_s  Σ_{j<s} F_j + T_s + Σ_{j<s} B_j.
// 0 (no bound) for measured compute models.
double step_time_lower_bound(const scenario::Scenario& s, const sim::CostModels& models) {
  if (!dynamic_cast<const sim::RooflineModel*>(models.compute.get())) return 0;
  const auto& st = s.strategy;
  const auto units = workload::make_units(s);
  const auto split = workload::split_stages(s.model.layers, st);
  const double m = st.grad_accum;
  const bool recompute = scenario::effective_recompute(st) != scenario::Recompute::none;
  const int head = static_cast<int>(units.size()) - 1;
  const workload::TpChains chains(s);
  const sim::GroupShape tp_group{st.tp, 1, st.tp};
  const scenario::DType dtype = scenario::gemm_dtype(st);
  const scenario::EfficiencyCurve& curve = s.cluster.gpu.efficiency(dtype);
  double best_dim = 0;  // a measured curve: the point of its best efficiency
  for (const auto& [d, e] : curve.table) {
    if (best_dim == 0 || e > curve.at(best_dim)) best_dim = d;
  }
  // A unit's work as the plan's compute op has it, without launches, at its own (or the
  // measured curve's best) GEMM dimension.
  auto time = [&](int index, plan::Phase phase) {
    plan::Compute c = workload::units_work(st, units, phase, index, index + 1);
    c.kernels = 0;
    if (!curve.table.empty()) c.gemm_dim = best_dim;
    return models.compute->duration(c);
  };
  // A unit's TP collectives; `but_trailing`: without one that ends its chain (the last unit of
  // an item: the next item's first op need not wait for it).
  auto tp_time = [&](int u, bool forward, bool but_trailing = false) {
    double t = 0;
    if (st.tp <= 1) return t;
    const auto pieces = chains.chain(u, u == head, forward);
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      // Overlapped ones (CP's ring beside the core, Megatron's and async TP's beside a GEMM)
      // cost no more than the compute beside them.
      if (!pieces[k].collective || pieces[k].alongside) continue;
      // An MoE block's dispatch and combine run on other groups: left out (a lower bound).
      if (pieces[k].group != workload::PieceGroup::tp) continue;
      if (but_trailing && k + 1 == pieces.size()) continue;
      t += models.network->collective(pieces[k].kind, tp_group, pieces[k].bytes).total_s();
    }
    return t;
  };
  const bool zero_bubble = scenario::splits_backward(st.schedule);
  double bound = 0, fill = 0, drain = 0;  // Σ F_j and Σ B_j over the stages ahead
  for (const auto& chunks : split) {
    double total = 0, first_forward = 0, last_backward = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const auto [b, e] = chunks[c];
      for (int u = b; u < e; ++u) {
        const plan::Unit& unit = units[u];
        const double fwd = time(u, plan::Phase::forward) + tp_time(u, true);
        double bwd = time(u, plan::Phase::backward) + tp_time(u, false);
        if (recompute && unit.recompute_flops > 0) {
          bwd += time(u, plan::Phase::recompute);
          if (st.recompute == scenario::Recompute::full) bwd += tp_time(u, true);
        }
        if (c == 0) {
          first_forward += fwd;
          last_backward += bwd;
        }
        // Over all micro-batches, less the trailing collective of each item.
        total += m * (fwd + bwd);
        if (u == e - 1) total -= m * (tp_time(u, true) - tp_time(u, true, true));
        if (u == b) total -= m * (tp_time(u, false) - tp_time(u, false, true));
      }
    }
    // A zero-bubble stage's W passes may run while the stages before it drain: no drain term.
    bound = std::max(bound, fill + total + (zero_bubble ? 0.0 : drain));
    fill += first_forward;
    drain += last_backward;
  }
  return bound;
}

SearchResult search(const scenario::Scenario& base, const SearchOptions& options,
                    const std::function<void(int, int)>& progress) {
  SearchResult result;
  auto configs = enumerate(base, options, result.invalid);
  result.enumerated = static_cast<int>(configs.size()) + result.invalid;
  const int total = static_cast<int>(configs.size());
  // Pass 1: drop what does not fit (the analytic model is exact enough to reject without
  // simulating; the simulated peak below is the final word) and bound the rest's throughput.
  std::vector<Pending> pending;
  for (int i = 0; i < total; ++i) {
    if (progress) progress(i / 2, total);
    const auto& s = configs[i];
    const auto memory = memory::estimate_memory(s);
    if (!memory.fits) {
      ++result.memory_rejected;
      continue;
    }
    Pending p;
    p.index = i;
    p.analytic_peak = memory.worst().peak_bytes;
    const double bound =
        options.keep_top > 0 ? step_time_lower_bound(s, sim::make_cost_models(s)) : 0.0;
    p.upper_tokens_per_s = bound > 0 ? static_cast<double>(s.tokens_per_step()) / bound
                                     : std::numeric_limits<double>::infinity();
    pending.push_back(p);
  }
  // Pass 2: simulate the most promising first. A configuration is skipped once it can enter
  // neither the best `keep_top` (that many simulated ones are already faster than its bound)
  // nor the Pareto front (a simulated one is faster than its bound and no heavier).
  std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    return a.upper_tokens_per_s > b.upper_tokens_per_s;
  });
  // The sequential rule: whether pending[k] can still enter the best keep_top or the front.
  auto prunable = [&](const Pending& p) {
    if (options.keep_top <= 0) return false;
    const auto faster =
        std::count_if(result.ranked.begin(), result.ranked.end(),
                      [&](const Candidate& c) { return c.tokens_per_s > p.upper_tokens_per_s; });
    const bool dominated =
        std::any_of(result.ranked.begin(), result.ranked.end(), [&](const Candidate& c) {
          return c.tokens_per_s > p.upper_tokens_per_s && c.peak_memory_bytes <= p.analytic_peak;
        });
    return faster >= options.keep_top && dominated;
  };
  // One simulation: the candidate, or nothing when it ran out of memory.
  struct Outcome {
    std::optional<Candidate> candidate;
    std::exception_ptr error;
  };
  auto simulate = [&](const Pending& p) {
    Outcome o;
    try {
      const auto& s = configs[p.index];
      const auto run = sim::simulate(s);
      Candidate c;
      c.scenario = s;
      c.label = s.name;
      c.step_time_s = run.metrics.step_time_s;
      c.tokens_per_s = run.metrics.tokens_per_s;
      c.mfu = run.metrics.mfu;
      c.bubble_fraction = run.metrics.bubble_fraction;
      c.exposed_comm_s = run.metrics.exposed_comm_s;
      bool oom = false;
      for (const auto& r : run.ranks) {
        c.peak_memory_bytes = std::max(c.peak_memory_bytes, r.peak_memory_bytes);
        oom = oom || r.oom;
      }
      if (!oom) o.candidate = std::move(c);
    } catch (...) {
      o.error = std::current_exception();
    }
    return o;
  };
  const int threads = std::max(
      1, options.threads > 0 ? options.threads
                             : static_cast<int>(std::min(8u, std::thread::hardware_concurrency())));
  // In order of the bound: take the next `threads` configurations that are not prunable now,
  // simulate them at once, then apply their outcomes in order, re-checking each against the
  // ones applied before it (what the sequential loop would have known).
  std::size_t k = 0;
  std::vector<std::size_t> batch;
  std::vector<Outcome> outcomes;
  while (k < pending.size()) {
    batch.clear();
    while (k < pending.size() && static_cast<int>(batch.size()) < threads) {
      if (progress)
        progress(total / 2 + static_cast<int>(k * (total - total / 2) / pending.size()), total);
      if (prunable(pending[k])) {
        ++result.pruned;
      } else {
        batch.push_back(k);
      }
      ++k;
    }
    if (batch.empty()) continue;
    // This thread simulates the first; one more thread per other configuration.
    outcomes.assign(batch.size(), Outcome{});
    std::vector<std::thread> workers;
    for (std::size_t b = 1; b < batch.size(); ++b) {
      workers.emplace_back([&, b] { outcomes[b] = simulate(pending[batch[b]]); });
    }
    outcomes[0] = simulate(pending[batch[0]]);
    for (auto& w : workers) w.join();
    for (std::size_t b = 0; b < batch.size(); ++b) {
      if (b > 0 && prunable(pending[batch[b]])) {
        ++result.pruned;  // sequentially, the ones before it would have pruned it
        continue;
      }
      if (outcomes[b].error) std::rethrow_exception(outcomes[b].error);
      ++result.simulated;
      if (!outcomes[b].candidate) {
        ++result.memory_rejected;
        continue;
      }
      result.ranked.push_back(std::move(*outcomes[b].candidate));
    }
  }
  if (progress) progress(total, total);
  // Best throughput first; ties broken by lower memory, then label (deterministic).
  std::sort(result.ranked.begin(), result.ranked.end(), [](const auto& a, const auto& b) {
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    if (a.peak_memory_bytes != b.peak_memory_bytes)
      return a.peak_memory_bytes < b.peak_memory_bytes;
    return a.label < b.label;
  });
  // Pareto front: no other configuration is both faster and lighter.
  std::vector<int> by_memory(result.ranked.size());
  for (std::size_t i = 0; i < by_memory.size(); ++i) by_memory[i] = static_cast<int>(i);
  std::stable_sort(by_memory.begin(), by_memory.end(), [&](int a, int b) {
    return result.ranked[a].peak_memory_bytes < result.ranked[b].peak_memory_bytes;
  });
  double best = -1;
  for (int i : by_memory) {
    if (result.ranked[i].tokens_per_s > best) {
      best = result.ranked[i].tokens_per_s;
      result.pareto.push_back(i);
    }
  }
  return result;
}

}  // namespace stratagem::tune
