#pragma once
// The cost models a simulation runs with, chosen from the scenario: a roofline compute model
// on its GPU and an α-β network on its cluster's links. Calibration (later) replaces them.
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "engine/spec/scenario.hpp"
#include "sim/compute_model.hpp"
#include "sim/network_model.hpp"

namespace stratagem::sim {

struct CostModels {
  std::shared_ptr<const ComputeModel> compute;
  std::shared_ptr<const NetworkModel> network;
  /// Compute on a rank runs 1 + this times slower while a collective or p2p transfer is in
  /// flight on that rank (SM and memory contention of communication kernels). 0: no effect.
  double comm_compute_slowdown = 0;
  /// The reverse: a transfer runs 1 + this times slower while any rank it involves computes,
  /// per kind of operation (indexed by spec::CommOp; sendrecv for p2p). All 0: no effect.
  std::array<double, spec::kCommOpCount> compute_comm_slowdown{};
  /// A rank's collectives (gather and collective streams) run one at a time in issue order.
  bool serial_collectives = false;
  std::string profile;  ///< hardware profile name recorded in results
};

struct CostOptions {
  Algorithm algorithm = Algorithm::fastest;
  /// Overrides the slow-down; unset: the cluster's calibration's, or 0 without one.
  std::optional<double> comm_compute_slowdown;
};

CostModels make_cost_models(const spec::Scenario& scenario, const CostOptions& options = {});

}  // namespace stratagem::sim
