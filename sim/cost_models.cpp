#include "sim/cost_models.hpp"

#include <algorithm>

#include "engine/plan/plan.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/workload/chain_piece.hpp"
#include "engine/workload/tp_chain.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::sim {

TpChainRoofline tp_chain_roofline(const scenario::Scenario& s, const RooflineModel& roofline) {
  TpChainRoofline t;
  t.full_recompute = scenario::effective_recompute(s.strategy) == scenario::Recompute::full;
  const auto units = workload::make_units(s);
  const workload::TpChains chains(s);
  const int head = static_cast<int>(units.size()) - 1;
  const int of_kind[3] = {0, 1, head};
  // The roofline time of the compute pieces of unit u's chain for `phase`.
  auto chain_s = [&](int u, plan::Phase phase) {
    const plan::Compute whole = workload::units_work(s.strategy, units, phase, u, u + 1);
    const auto& chain = chains.chain(u, u == head, phase == plan::Phase::forward);
    const int segments = workload::compute_segments(chain);
    double total = 0;
    for (const workload::TpPiece& p : chain) {
      if (!p.collective) total += roofline.duration(workload::tp_piece_work(whole, p, segments));
    }
    return total;
  };
  const bool zero_bubble = scenario::splits_backward(s.strategy.schedule);
  for (int kind = 0; kind < 3; ++kind) {
    const int u = of_kind[kind];
    t.roofline_s[kind][0] = chain_s(u, plan::Phase::backward);
    t.roofline_s[kind][1] = chain_s(u, plan::Phase::forward);
    if (zero_bubble) t.input_s[kind] = chain_s(u, plan::Phase::backward_input);
  }
  return t;
}

CostModels make_cost_models(const scenario::Scenario& s, const CostOptions& options) {
  const auto& c = s.cluster;
  CostModels m;
  RooflineModel roofline = scenario_roofline(s, default_host(c.gpus_per_node));
  const std::string key = scenario::unit_shape_key(s);
  const auto measured =
      std::find_if(c.gpu.measured_units.begin(), c.gpu.measured_units.end(),
                   [&](const scenario::MeasuredUnits& u) { return u.shape == key; });
  // Units measured at the scenario's tp (the key says which; context parallelism is not
  // measured: its chains fall back to the roofline).
  if (measured != c.gpu.measured_units.end() && s.strategy.cp == 1) {
    std::optional<TpChainRoofline> tp;
    if (s.strategy.tp > 1) tp = tp_chain_roofline(s, roofline);
    std::array<double, 3> weight_share{};
    if (scenario::splits_backward(s.strategy.schedule)) {
      // Each unit kind's W pass over its B and W passes, on the roofline.
      const auto units = workload::make_units(s);
      const int of_kind[3] = {0, 1, static_cast<int>(units.size()) - 1};
      for (int kind = 0; kind < 3; ++kind) {
        const int u = of_kind[kind];
        const double w = roofline.duration(
            workload::units_work(s.strategy, units, plan::Phase::backward_weight, u, u + 1));
        const double b = roofline.duration(
            workload::units_work(s.strategy, units, plan::Phase::backward_input, u, u + 1));
        weight_share[kind] = w + b > 0 ? w / (w + b) : 0.0;
      }
    }
    auto model = std::make_shared<MeasuredUnitsModel>(
        *measured, static_cast<int>(s.model.layers) + 1, std::move(roofline), std::move(tp));
    model->set_weight_share(weight_share);
    m.compute = std::move(model);
    m.compute_jitter_cv = measured->jitter_cv;
    m.rank_jitter_cv = measured->rank_cv;
  } else {
    m.compute = std::make_shared<RooflineModel>(std::move(roofline));
  }
  if (options.compute_jitter_cv) m.compute_jitter_cv = *options.compute_jitter_cv;
  if (options.rank_jitter_cv) m.rank_jitter_cv = *options.rank_jitter_cv;
  AlphaBetaNetwork links(c.intra_node, c.inter_node, options.algorithm);
  if (c.calibration) {
    m.network = std::make_shared<CalibratedNetwork>(*c.calibration, links);
    m.comm_compute_slowdown =
        options.comm_compute_slowdown.value_or(c.calibration->comm_compute_slowdown);
    for (int i = 0; i < scenario::kCommOpCount; ++i) {
      m.compute_comm_slowdown[i] = c.calibration->ops[i].slowdown_during_compute;
      m.cold_start_s[i] = c.calibration->ops[i].cold_start_s;
    }
    m.serial_collectives = c.calibration->serial_collectives;
    m.compute_contention = c.calibration->compute_contention;
    m.contention_processes = c.calibration->processes;
    m.profile = "profile " + c.calibration->profile;
  } else {
    m.network = std::make_shared<AlphaBetaNetwork>(links);
    m.comm_compute_slowdown =
        options.comm_compute_slowdown.value_or(c.gpu.comm_compute_slowdown.value_or(0.0));
    m.profile = "analytic " + c.gpu.name + " / " + (c.name.empty() ? "cluster" : c.name);
  }
  return m;
}

}  // namespace stratagem::sim
