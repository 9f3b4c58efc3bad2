#include "sim/cost_models.hpp"

namespace stratagem::sim {

CostModels make_cost_models(const spec::Scenario& s, const CostOptions& options) {
  const auto& c = s.cluster;
  CostModels m;
  m.compute = std::make_shared<RooflineModel>(c.gpu, default_host(c.gpus_per_node));
  m.network = std::make_shared<AlphaBetaNetwork>(c.intra_node, c.inter_node, options.algorithm);
  m.comm_compute_slowdown = options.comm_compute_slowdown;
  m.profile = "analytic " + c.gpu.name + " / " + (c.name.empty() ? "cluster" : c.name);
  return m;
}

}  // namespace stratagem::sim
