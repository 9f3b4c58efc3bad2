#include "engine/measure/unit_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

#include "engine/comm/communicator.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/measure/tp_chain_timing.hpp"
#include "engine/plan/builder.hpp"
#include "engine/result/metrics.hpp"
#include "engine/runtime/executor_state.hpp"
#include "engine/runtime/model_layout.hpp"
#include "engine/runtime/model_units.hpp"
#include "engine/scenario/profile.hpp"

namespace stratagem::measure {

using runtime::check_runtime_model;
using runtime::GptUnits;
using runtime::ModelState;
using runtime::Numerics;
using runtime::OptimizerConfig;
using runtime::TpShard;
using runtime::UnitActivation;
using runtime::UnitGrads;

std::function<void()> block_workload(const scenario::Scenario& scenario,
                                     const c10::Device& device) {
  check_runtime_model(scenario.model);
  auto units =
      std::make_shared<GptUnits>(scenario.model, scenario.training.seq_len, false,
                                 Numerics::of(scenario.strategy, device), device);
  const at::Tensor params =
      units->initial_params(1, 1234).to(device).to(units->numerics().param_dtype);
  const std::int64_t mb = scenario.strategy.micro_batch_size, seq = scenario.training.seq_len;
  const at::Tensor x = units->to_boundary(
      at::randn({mb, seq, scenario.model.hidden}, at::TensorOptions().device(device)));
  const at::Tensor grad = at::randn_like(x);
  return [units, params, x, grad] {
    UnitActivation a =
        units->forward(1, params, at::Tensor(), x, at::Tensor(), scenario::Recompute::none);
    synchronize(units->backward(a, grad).input);
  };
}

scenario::MeasuredUnits measure_units(const scenario::Scenario& scenario, const c10::Device& device,
                                      int repetitions) {
  check_runtime_model(scenario.model);
  // One block is enough: blocks are identical. The executor's own state holds the parameters,
  // gradients and optimizer states, so the update timed is the one training runs.
  // With tensor parallelism: TP rank 0's shard of each unit, its chains run as the executor
  // runs them (tp and sequence parallelism kept), the collectives stood in for locally.
  scenario::Scenario s = scenario;
  s.model.layers = 1;
  auto& st = s.strategy;
  st.dp = st.pp = st.chunks = st.cp = 1;
  st.grad_accum = 1;
  st.sharding = scenario::Sharding::none;
  st.offload_optimizer = scenario::Offload::none;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = st.tp;
  s.training.global_batch = st.micro_batch_size;
  const plan::StepPlan plan = plan::build_plan(s, {.fold = false});
  const GptUnits units(s.model, s.training.seq_len, false, Numerics::of(st, device), device,
                       TpShard{st.tp, 0}, st.tp > 1 && st.sequence_parallel);
  ModelState state(plan, 0, units, 1234, OptimizerConfig::defaults(st.optimizer, 1e-4), device);

  const std::int64_t seq = s.training.seq_len, mb = st.micro_batch_size;
  const at::Tensor tokens =
      at::randint(s.model.vocab, {mb, seq + 1}, at::TensorOptions().dtype(at::kLong)).to(device);
  const at::Tensor input = tokens.narrow(1, 0, seq), targets = tokens.narrow(1, 1, seq);
  const int head = units.head_unit();
  const at::Tensor scale = at::ones({}, at::TensorOptions().dtype(at::kFloat).device(device));
  double params = 0;
  for (int u = 0; u < units.count(); ++u) params += static_cast<double>(units.numel(u));

  std::vector<std::vector<double>> t(7);
  if (st.tp > 1) {
    t = time_tp_chains(s, units, state, input, targets, repetitions);
  }
  using Clock = std::chrono::steady_clock;
  for (int rep = 0; rep <= repetitions && st.tp == 1; ++rep) {
    state.zero_grads();
    at::Tensor borrowed;
    if (units.head_borrows_embedding()) {
      const auto& slot = units.layout(0).slot("wte");
      borrowed = state.unit_params(0).narrow(0, slot.offset, slot.numel);
    }
    std::vector<Clock::time_point> at_(8);
    at_[0] = Clock::now();
    UnitActivation a0 = units.forward(0, state.unit_params(0), at::Tensor(), input, at::Tensor(),
                                      scenario::Recompute::none);
    const at::Tensor x0 = units.to_boundary(a0.output);
    synchronize(x0);
    at_[1] = Clock::now();
    UnitActivation a1 = units.forward(1, state.unit_params(1), at::Tensor(), x0, at::Tensor(),
                                      scenario::Recompute::none);
    const at::Tensor x1 = units.to_boundary(a1.output);
    synchronize(x1);
    at_[2] = Clock::now();
    UnitActivation ah = units.forward(head, state.unit_params(head), borrowed, x1, targets,
                                      scenario::Recompute::none);
    synchronize(ah.output);
    at_[3] = Clock::now();
    UnitGrads gh = units.backward(ah, scale);
    state.add_grad(head, 0, gh.params);
    if (gh.borrowed.defined()) {
      state.add_grad(0, units.layout(0).slot("wte").offset, gh.borrowed);
    }
    synchronize(gh.input);
    at_[4] = Clock::now();
    UnitGrads g1 = units.backward(a1, gh.input);
    state.add_grad(1, 0, g1.params);
    synchronize(g1.input);
    at_[5] = Clock::now();
    UnitGrads g0 = units.backward(a0, g1.input);
    state.add_grad(0, 0, g0.params);
    synchronize(g0.params);
    at_[6] = Clock::now();
    state.optimizer_step(1.0);
    synchronize(state.unit_params(0));
    at_[7] = Clock::now();
    if (rep == 0) continue;  // warm-up: allocations, kernel selection
    for (int k = 0; k < 7; ++k) {
      t[k].push_back(std::chrono::duration<double>(at_[k + 1] - at_[k]).count());
    }
  }
  scenario::MeasuredUnits m;
  m.shape = scenario::unit_shape_key(scenario);
  m.embedding_forward = result::median(t[0]);
  m.block_forward = result::median(t[1]);
  m.head_forward = result::median(t[2]);
  m.head_backward = result::median(t[3]);
  m.block_backward = result::median(t[4]);
  m.embedding_backward = result::median(t[5]);
  m.optimizer_per_param = result::median(t[6]) / params;
  // The spread of a block's forward + backward from one repetition to the next.
  std::vector<double> block(t[1].size());
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = t[1][i] + t[4][i];
  m.jitter_cv = result::coefficient_of_variation(block);
  return m;
}

scenario::MeasuredUnits measure_units_on_all_ranks(const scenario::Scenario& scenario,
                                                   comm::Communicator& comm,
                                                   const c10::Device& device, int repetitions) {
  comm.barrier({});
  const scenario::MeasuredUnits mine = measure_units(scenario, device, repetitions);
  // Every rank's figures on every rank, then one average (the same everywhere).
  constexpr int kFields = 8;
  const at::Tensor local =
      at::tensor(
          {mine.embedding_forward, mine.embedding_backward, mine.block_forward, mine.block_backward,
           mine.head_forward, mine.head_backward, mine.optimizer_per_param, mine.jitter_cv},
          at::kDouble)
          .to(device);
  at::Tensor all = at::empty({comm.world_size() * kFields}, local.options());
  comm.all_gather(all, local, {})->wait();
  all = all.cpu();
  const double* v = all.data_ptr<double>();
  std::vector<scenario::MeasuredUnits> ranks(static_cast<std::size_t>(comm.world_size()), mine);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const double* f = v + r * kFields;
    auto& u = ranks[r];
    u.embedding_forward = f[0];
    u.embedding_backward = f[1];
    u.block_forward = f[2];
    u.block_backward = f[3];
    u.head_forward = f[4];
    u.head_backward = f[5];
    u.optimizer_per_param = f[6];
    u.jitter_cv = f[7];
  }
  return scenario::average_units(ranks, /*between_is_rank=*/true);
}

}  // namespace stratagem::measure
