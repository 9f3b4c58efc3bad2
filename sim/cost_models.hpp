#pragma once
// The cost models a simulation runs with, chosen from the scenario: a roofline compute model
// on its GPU and an α-β network on its cluster's links. Calibration (later) replaces them.
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "engine/scenario/scenario.hpp"
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
  /// per kind of operation (indexed by scenario::CommOp; sendrecv for p2p). All 0: no effect.
  std::array<double, scenario::kCommOpCount> compute_comm_slowdown{};
  /// A rank's collectives (gather and collective streams) run one at a time in issue order.
  bool serial_collectives = false;
  /// Extra latency of a collective (by scenario::CommOp) that starts while one of its ranks has
  /// no communication in flight and none that ended at that instant: issued after compute,
  /// not queued behind another (engine/measure/cold_start.hpp). All 0: no effect.
  std::array<double, scenario::kCommOpCount> cold_start_s{};
  /// Compute shared by a node's ranks (scenario::CommCalibration::compute_contention): a compute
  /// op's time holds for `contention_processes` ranks of its node computing at once; with k
  /// computing it runs (1 + c·(processes − 1)) / (1 + c·(k − 1)) times as fast. 0: no effect.
  double compute_contention = 0;
  int contention_processes = 1;
  /// How fast compute runs with `computing` ranks of its node computing (itself included),
  /// relative to the durations the compute model gives.
  double contention_rate(int computing) const {
    const int k = computing > 1 ? computing : 1;
    return (1 + compute_contention * (contention_processes - 1)) / (1 + compute_contention * (k - 1));
  }
  /// Compute's spread (standard deviation / mean): `compute_jitter_cv` independent per op,
  /// `rank_jitter_cv` a per-rank speed that holds over a step (its error grows with the compute
  /// summed, not its square root). The ranks of a collective or transfer then arrive at it
  /// spread out, and it starts when the last one arrives: the simulator starts it at the
  /// expected latest arrival (Clark's maximum of normals over the members' compute since they
  /// last waited for one another). Both 0: every rank arrives exactly on time.
  double compute_jitter_cv = 0;
  double rank_jitter_cv = 0;
  bool has_jitter() const { return compute_jitter_cv > 0 || rank_jitter_cv > 0; }
  std::string profile;  ///< hardware profile name recorded in results
};

struct CostOptions {
  Algorithm algorithm = Algorithm::fastest;
  /// Overrides the slow-down; unset: the cluster's calibration's, or 0 without one.
  std::optional<double> comm_compute_slowdown;
  /// Override the compute spreads; unset: the profile's measured ones for the scenario's
  /// shape, or 0.
  std::optional<double> compute_jitter_cv;
  std::optional<double> rank_jitter_cv;
};

CostModels make_cost_models(const scenario::Scenario& scenario, const CostOptions& options = {});

/// The roofline time of each tensor-parallel chain's compute pieces (MeasuredUnitsModel with
/// tp > 1), by kind of unit and direction, on `roofline`'s device.
TpChainRoofline tp_chain_roofline(const scenario::Scenario& scenario,
                                  const RooflineModel& roofline);

}  // namespace stratagem::sim
