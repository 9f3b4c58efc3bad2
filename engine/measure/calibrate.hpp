#pragma once
// `stratagem calibrate`: measures this machine with every process of the job running at once
// (so each number is what one process gets while the others work too) and returns a hardware
// profile (engine/scenario/profile.hpp) for the simulator:
//  - device: matmul rate per dtype over a sweep of square GEMMs (plus the scenario's own GEMM
//    shapes when one is given), fitted to peak · d / (d + half_dim); element-wise adds over a
//    size sweep fitted to launch + bytes / bandwidth (the launch term is kernel_launch_us);
//  - network: every collective over a size sweep (commbench.hpp, nccl-tests sizes) and a
//    p2p ping-pong (half the round trip), each fitted to α + bus_factor · S / busbw with
//    relative least squares;
//  - overlap: the matmul rate alone and while all-reduces run in the background: the compute
//    slow-down during communication, and the communication slow-down during compute.
// Every rank runs it with the same options; every rank returns the same profile.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "engine/comm/communicator.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::measure {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct CalibrateOptions {
  bool quick = false;                  ///< fewer and shorter measurements (tests: a few seconds)
  std::string name;                    ///< profile name; empty: "<device> x<processes> (<backend>)"
  std::vector<GemmShape> extra_gemms;  ///< measured too (the scenario's shapes)
  /// Scenarios whose model units are timed at their micro-batch (scenario::MeasuredUnits).
  std::vector<scenario::Scenario> unit_scenarios;
  c10::Device device = c10::Device(c10::kCPU);
  int local_processes = 1;  ///< processes sharing this machine (memory share)
  std::string stratagem_version;
};

/// The GEMMs of one transformer block's forward for `s`'s model and micro-batch: tokens × h
/// by h × 3h (QKV, or h × (h + 2·kv) with grouped-query attention), h × h (projection),
/// h × ffn and ffn × h (MLP; SwiGLU adds a second h × ffn).
std::vector<GemmShape> model_gemms(const scenario::Scenario& s);

/// Measures and fits; `log` receives progress lines (rank 0 prints them).
scenario::HardwareProfile calibrate(comm::Communicator& comm, const CalibrateOptions& options,
                                    const std::function<void(const std::string&)>& log = {});

}  // namespace stratagem::measure
