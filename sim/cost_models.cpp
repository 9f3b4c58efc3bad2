#include "sim/cost_models.hpp"

namespace stratagem::sim {

CostModels make_cost_models(const spec::Scenario& s, const CostOptions& options) {
  const auto& c = s.cluster;
  CostModels m;
  m.compute = std::make_shared<RooflineModel>(c.gpu, default_host(c.gpus_per_node));
  AlphaBetaNetwork links(c.intra_node, c.inter_node, options.algorithm);
  if (c.calibration) {
    m.network = std::make_shared<CalibratedNetwork>(*c.calibration, links);
    m.comm_compute_slowdown =
        options.comm_compute_slowdown.value_or(c.calibration->comm_compute_slowdown);
    m.profile = "profile " + c.calibration->profile;
  } else {
    m.network = std::make_shared<AlphaBetaNetwork>(links);
    m.comm_compute_slowdown = options.comm_compute_slowdown.value_or(0.0);
    m.profile = "analytic " + c.gpu.name + " / " + (c.name.empty() ? "cluster" : c.name);
  }
  return m;
}

}  // namespace stratagem::sim
