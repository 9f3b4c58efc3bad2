#pragma once
// A hardware profile: what `stratagem calibrate` measured on one machine, in a versioned JSON
// file that `sim`, `compare` and `search` accept with `--profile` in place of the scenario's
// GPU and link description. Parsing and applying it needs no LibTorch; the measuring lives in
// engine/measure/calibrate.hpp.
//
// Format ("format": "stratagem-profile", "version": 1; units as the scenario files: _us, _GBps,
// _tflops, _GiB). Keys marked * are required. Matmul points set the simulator's efficiency
// curve; the other points are kept for inspection.
//   name, machine {cpu_model, nproc, memory_GiB, hostname, device, backend, processes,
//                  threads_per_process, date, stratagem_version, torch_version, duration_s,
//                  quick, load_average}                                  (metadata)
//   device* {memory_GiB*, kernel_launch_us*,
//            matmul* {fp32* {peak_tflops*, half_dim*, rms_rel_error, points [{m, n, k, tflops}]},
//                     tf32, fp16, bf16 (same keys; missing ones take fp32's)},
//            elementwise* {GBps*, launch_us, rms_rel_error, points [{bytes, us}]}}
//   network {backend, processes*,                       (absent for a one-process profile)
//            all_reduce*, reduce_scatter*, all_gather*, broadcast*, sendrecv*:
//              {alpha_us*, busbw_GBps*, rms_rel_error, points [{bytes, us}]}}
//   overlap {comm_compute_slowdown*, compute_alone_us, compute_with_comm_us,
//            comm_alone_us, comm_with_compute_us, comm_slowdown_during_compute}
// Meaning: a GEMM whose smallest dimension is d runs at the rate measured for d (points,
// interpolated in log d between them, see matmul_curve) or, without points, at
// peak·d/(d + half_dim) FLOP/s; a memory-bound kernel moving B bytes takes kernel_launch_us + B /
// elementwise bandwidth; a collective on the measured group of `processes` ranks with an S-byte
// buffer (nccl-tests' size) takes alpha + bus_factor(op, n)·S / busbw (comm_op.hpp); sendrecv is
// one p2p message (alpha + S / busbw); compute runs 1 + comm_compute_slowdown times slower while
// communication is in flight on its rank. All rates are per process with every process of
// the profile running at once.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/cluster.hpp"
#include "engine/scenario/comm_op.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::scenario {

inline constexpr const char* kProfileFormat = "stratagem-profile";
inline constexpr int kProfileVersion = 1;

struct ProfileMachine {
  std::string cpu_model;
  int nproc = 0;  ///< CPUs the OS shows
  double memory_bytes = 0;
  std::string hostname;
  std::string device;   ///< "cpu" or the GPU's name
  std::string backend;  ///< "gloo" | "nccl"
  int processes = 1;    ///< processes that ran at once (one per device)
  int threads_per_process = 1;
  std::string date;  ///< ISO 8601, UTC
  std::string stratagem_version;
  std::string torch_version;
  double duration_s = 0;
  bool quick = false;
  double load_average = 0;  ///< 1-minute load average when calibration started (noise hint)
};

struct MatmulPoint {
  double m = 0, n = 0, k = 0;
  units::FlopsPerS flops_per_s = 0;
};

struct MatmulProfile {
  units::FlopsPerS peak = 0;  ///< approached by large GEMMs
  double half_dim = 0;        ///< rate(d) = peak · d / (d + half_dim)
  double rms_rel_error = 0;
  std::vector<MatmulPoint> points;
};

struct SizePoint {
  units::Bytes bytes = 0;
  units::Seconds seconds = 0;
};

struct ElementwiseProfile {
  units::BytesPerS bandwidth = 0;  ///< bytes read + written per second
  units::Seconds launch_s = 0;     ///< the fit's fixed cost per kernel
  double rms_rel_error = 0;
  std::vector<SizePoint> points;
};

struct DeviceProfile {
  units::Bytes memory_bytes = 0;  ///< per process
  units::Seconds kernel_launch_s = 0;
  std::map<DType, MatmulProfile> matmul;  ///< fp32 always; others when measured
  ElementwiseProfile elementwise;
  std::vector<MeasuredUnits> units;  ///< per scenario shape measured (`--scenario`)
};

struct CommProfile {
  units::Seconds alpha_s = 0;
  units::BytesPerS bus_bandwidth = 0;
  double rms_rel_error = 0;
  std::vector<SizePoint> points;  ///< nccl-tests size → time (max over ranks)
  /// Collectives: the mean time of a call right after a compute burst minus that of a call in
  /// a back-to-back stream, at `cold_start_bytes` (engine/measure/cold_start.hpp); 0: none or
  /// not measured (sendrecv is not).
  units::Seconds cold_start_s = 0;
  units::Seconds cold_start_back_to_back_s = 0, cold_start_after_compute_s = 0;
  double cold_start_bytes = 0;
};

struct NetworkProfile {
  std::string backend;
  int processes = 2;
  std::map<CommOp, CommProfile> ops;  ///< all five CommOps
};

struct OverlapProfile {
  double comm_compute_slowdown = 0;
  units::Seconds compute_alone_s = 0, compute_with_comm_s = 0;
  units::Seconds comm_alone_s = 0, comm_with_compute_s = 0;
  double comm_slowdown_during_compute = 0;
  /// The same per collective (all_reduce, reduce_scatter, all_gather measured); the others
  /// take comm_slowdown_during_compute. Reductions on CPUs compete with compute for the cores.
  std::map<CommOp, double> comm_slowdown_during_compute_by_op;
  /// Compute on one process against compute on all at once (engine/measure/compute_contention):
  /// a work item's time with the others idle, with all computing, and the extra time per other
  /// computing process, (together / alone − 1) / (processes − 1). 0: not measured (GPUs).
  units::Seconds compute_each_alone_s = 0, compute_each_together_s = 0;
  double compute_contention = 0;
};

struct HardwareProfile {
  std::string name;
  std::string source;  ///< file it was loaded from ("" when built in code)
  ProfileMachine machine;
  DeviceProfile device;
  std::optional<NetworkProfile> network;
  OverlapProfile overlap;
};

/// Parses and validates a profile document; SpecError names the JSON path ("device.matmul.fp32
/// .peak_tflops") prefixed by `source`. Rejects other formats and newer versions.
HardwareProfile parse_profile(const nlohmann::json& doc, const std::string& source);
/// Reads and parses a profile file.
HardwareProfile load_profile(const std::string& file);
nlohmann::json to_json(const HardwareProfile& p);
/// Writes the profile (pretty-printed); RuntimeError when the file cannot be written.
void save_profile(const HardwareProfile& p, const std::string& file);

/// The simulator's efficiency curve for a measured dtype: with two or more distinct smallest
/// dimensions among the points, a table of measured rate / peak interpolated in log d (what
/// the device really did at each size: CPUs are not monotonic in d); otherwise the fitted
/// peak·d/(d + half_dim).
EfficiencyCurve matmul_curve(const MatmulProfile& m);
/// The profile's device as the simulator's GPU description: per-dtype peaks and efficiency
/// curves (matmul_curve), element-wise bandwidth as `hbm_bandwidth`, the fitted launch cost.
GpuSpec profile_gpu(const HardwareProfile& p);
/// The profile's network and overlap as the simulator's calibration (nullopt without network).
std::optional<CommCalibration> profile_calibration(const HardwareProfile& p);

/// What a unit's cost depends on besides the device: the model's layer shape, the sequence
/// length, the micro-batch and the precision ("h256 a4 kv4 ffn1024 v1024 layernorm gelu
/// learned bias untied s128 b4 fp32"), and with tensor parallelism its degree and sequence
/// parallelism (" tp2 sp": the units are one TP rank's). MeasuredUnits apply to scenarios
/// with the same key.
std::string unit_shape_key(const Scenario& s);

/// Replaces the scenario's hardware with the profile's: the GPU becomes the profiled device,
/// the intra-node link the profiled p2p α/β (inter-node too on a one-node cluster), and
/// collectives inside a node use the profiled α/β per operation plus the overlap slow-down.
/// Node count and devices per node stay the scenario's; without a network section (a
/// one-process profile) so do its links. Re-validates the scenario.
void apply_profile(Scenario& scenario, const HardwareProfile& profile);

}  // namespace stratagem::scenario
