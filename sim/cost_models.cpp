#include "sim/cost_models.hpp"

#include <algorithm>

#include "engine/spec/profile.hpp"

namespace stratagem::sim {

CostModels make_cost_models(const spec::Scenario& s, const CostOptions& options) {
  const auto& c = s.cluster;
  CostModels m;
  RooflineModel roofline(c.gpu, default_host(c.gpus_per_node));
  const std::string key = spec::unit_shape_key(s);
  const auto measured = std::find_if(c.gpu.measured_units.begin(), c.gpu.measured_units.end(),
                                     [&](const spec::MeasuredUnits& u) { return u.shape == key; });
  // Measured units time whole units at tp = 1; a tensor-parallel step splits each unit into
  // sharded segments the measurement did not see, so those fall back to the roofline.
  if (measured != c.gpu.measured_units.end() && s.strategy.tp == 1) {
    m.compute = std::make_shared<MeasuredUnitsModel>(
        *measured, static_cast<int>(s.model.layers) + 1, std::move(roofline));
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
    for (int i = 0; i < spec::kCommOpCount; ++i) {
      m.compute_comm_slowdown[i] = c.calibration->ops[i].slowdown_during_compute;
    }
    m.serial_collectives = c.calibration->serial_collectives;
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
