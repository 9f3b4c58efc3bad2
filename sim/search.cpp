#include "sim/search.hpp"

#include <algorithm>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/spec/error.hpp"
#include "sim/simulator.hpp"

namespace stratagem::sim {

namespace {

std::vector<spec::Scenario> enumerate(const spec::Scenario& base, const SearchOptions& o,
                                      int& invalid) {
  using spec::Schedule;
  using spec::Sharding;
  const int world = base.cluster.world_size();
  std::vector<spec::Scenario> out;
  // Tensor parallelism inside a node (divisors of gpus_per_node), with and without sequence
  // parallelism; the mesh validation drops degrees the model's heads or ffn do not allow.
  std::vector<std::pair<int, bool>> tensor;
  for (int tp = 1; tp <= base.cluster.gpus_per_node; ++tp) {
    if (base.cluster.gpus_per_node % tp != 0) continue;
    tensor.push_back({tp, false});
    if (tp > 1) tensor.push_back({tp, true});
  }
  for (const auto& [tp, sp] : tensor) {
    const int ranks = world / tp;  // per tensor-parallel index
    for (int pp = 1; pp <= std::min(ranks, o.max_pp); ++pp) {
      if (ranks % pp != 0 || pp > base.model.layers) continue;
      const int dp = ranks / pp;
      std::vector<std::pair<Schedule, int>> schedules = {{Schedule::one_f_one_b, 1}};
      if (pp > 1) {
        schedules = {{Schedule::gpipe, 1}, {Schedule::one_f_one_b, 1}, {Schedule::interleaved, 2}};
      }
      std::vector<Sharding> shardings = {Sharding::none, Sharding::zero1};
      if (pp == 1 && dp > 1) {
        shardings.insert(shardings.end(),
                         {Sharding::zero2, Sharding::zero3, Sharding::fsdp_shard_grad_op});
        if (base.cluster.nodes > 1) shardings.push_back(Sharding::fsdp_hybrid_shard);
      }
      for (int mbs = 1; mbs <= o.max_micro_batch_size; mbs *= 2) {
        const std::int64_t per_accum = std::int64_t{mbs} * dp;
        if (base.training.global_batch % per_accum != 0) continue;
        const int m = static_cast<int>(base.training.global_batch / per_accum);
        for (const auto& [schedule, chunks] : schedules) {
          for (Sharding sharding : shardings) {
            for (spec::Precision precision : o.precisions) {
              for (spec::Recompute recompute : o.recomputes) {
                spec::Scenario s = base;
                auto& st = s.strategy;
                st = spec::StrategySpec{};
                st.dp = dp;
                st.pp = pp;
                st.tp = tp;
                st.sequence_parallel = sp;
                st.schedule = schedule;
                st.chunks = chunks;
                st.micro_batch_size = mbs;
                st.grad_accum = m;
                st.sharding = sharding;
                st.precision = precision;
                st.recompute = recompute;
                st.optimizer = base.strategy.optimizer;
                try {
                  spec::validate(s);
                } catch (const SpecError&) {
                  ++invalid;
                  continue;
                }
                s.name = strategy_label(s);
                out.push_back(std::move(s));
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

std::string strategy_label(const spec::Scenario& s) {
  const auto& st = s.strategy;
  std::string label = "dp " + std::to_string(st.dp);
  if (st.tp > 1) {
    label += " × tp " + std::to_string(st.tp) + (st.sequence_parallel ? " SP" : "");
  }
  label += " × pp " + std::to_string(st.pp);
  if (st.pp > 1) {
    label += ", " + std::string(spec::to_string(st.schedule));
    if (st.schedule == spec::Schedule::interleaved) label += " v" + std::to_string(st.chunks);
  }
  label += ", mbs " + std::to_string(st.micro_batch_size) + " × " + std::to_string(st.grad_accum);
  label += ", " + std::string(spec::to_string(st.sharding));
  label += ", " + std::string(st.precision == spec::Precision::no ? "fp32"
                                                                  : spec::to_string(st.precision));
  label += ", recompute " + std::string(spec::to_string(st.recompute));
  return label;
}

SearchResult search(const spec::Scenario& base, const SearchOptions& options,
                    const std::function<void(int, int)>& progress) {
  SearchResult result;
  auto configs = enumerate(base, options, result.invalid);
  result.enumerated = static_cast<int>(configs.size()) + result.invalid;
  const int total = static_cast<int>(configs.size());
  Simulator simulator;
  for (int i = 0; i < total; ++i) {
    if (progress) progress(i, total);
    const auto& s = configs[i];
    // The analytic model is exact enough to reject without simulating (see the agreement
    // test); the simulated peak below is the final word.
    if (!memory::estimate_memory(s).fits) {
      ++result.memory_rejected;
      continue;
    }
    const auto plan = plan::build_plan(s);
    const auto run = simulator.run(plan, make_cost_models(s));
    ++result.simulated;
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
    if (oom) {
      ++result.memory_rejected;
      continue;
    }
    result.ranked.push_back(std::move(c));
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

}  // namespace stratagem::sim
