#pragma once
// GPUs, links and clusters. Numbers in SI units (bytes, bytes/s, FLOP/s, seconds).
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/comm_op.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::scenario {

/// fp8: E4M3 GEMMs (Transformer Engine / torchao float8; stored as 1 byte).
enum class DType { fp32, tf32, fp16, bf16, fp8 };
const char* to_string(DType d);
/// Bytes per element of a storage dtype (tf32 is stored as fp32).
double dtype_bytes(DType d);

/// How far a matrix multiply gets from the peak: efficiency(d) = max · d / (d + half_dim),
/// where d is the smallest of the GEMM's m, n, k. Small GEMMs are launch- and tile-bound.
/// A measured curve (a hardware profile's GEMM points) replaces the formula: `table` holds
/// (d, efficiency) pairs by increasing d, interpolated linearly in log d and held constant
/// beyond its ends.
struct EfficiencyCurve {
  double max = 0.8;
  double half_dim = 128;
  std::vector<std::pair<double, double>> table;
  double at(double smallest_dim) const;
};

/// Measured times of one model's units on this device at one micro-batch shape (`stratagem
/// calibrate --scenario`): one forward and one backward of the embedding, of one transformer
/// block and of the head, and the optimizer's update per parameter, with every process of the
/// profile running at once. The simulator uses them for compute ops of a scenario whose
/// `unit_shape_key` (profile.hpp) equals `shape`; other ops keep the roofline.
struct MeasuredUnits {
  std::string shape;
  units::Seconds embedding_forward = 0, embedding_backward = 0;
  units::Seconds block_forward = 0, block_backward = 0;
  units::Seconds head_forward = 0, head_backward = 0;
  units::Seconds optimizer_per_param = 0;  ///< 0: not measured
  /// Spread of compute, measured with every process computing at once, as coefficients of
  /// variation (standard deviation / mean) of one block's forward + backward: `jitter_cv` from
  /// one repetition to the next on a rank (independent per op), `rank_cv` between the ranks'
  /// means (one rank steadily slower than another). The simulator turns both into the wait for
  /// the slowest member at each collective and transfer (sim::CostModels). 0: not measured.
  double jitter_cv = 0;
  double rank_cv = 0;
};

/// A fused attention kernel's forward + backward efficiency on one GPU (fraction of the 16-bit
/// peak, counting the FLOPs it executes: a causal mask skips half) as a function of the
/// sequence length s: max · s / (s + half_seq), for one head dimension, causal or not. Fitted
/// to the kernel's published benchmark (the preset's `source`).
struct AttentionCurve {
  int head_dim = 128;
  bool causal = true;
  double max = 0.5;
  double half_seq = 0;
  double at(double seq) const { return max * seq / (seq + half_seq); }
};

struct GpuSpec {
  std::string name;
  units::Bytes memory_bytes = 0;
  units::FlopsPerS peak_fp32 = 0;
  units::FlopsPerS peak_tf32 = 0;
  units::FlopsPerS peak_fp16 = 0;
  units::FlopsPerS peak_bf16 = 0;
  units::FlopsPerS peak_fp8 = 0;  ///< dense FP8 tensor-core peak; 0: the part has no fp8
  /// Tensor cores that apply MX block scales (32-element blocks, e8m0 scales) in the GEMM
  /// (Blackwell's tcgen05 block-scaled MMA): what strategy.fp8_recipe mxfp8 needs.
  bool mx_formats = false;
  units::BytesPerS hbm_bandwidth = 0;
  /// Streaming multiprocessors (AMD: compute units): how many GEMM output tiles run at once,
  /// for wave quantization (sim/gemm_cost.hpp). 0: not given (a profiled device), no wave
  /// quantization.
  int sm_count = 0;
  /// Fraction of hbm_bandwidth memory-bound kernels reach (a stream copy's, measured); 1 for
  /// a profiled device, whose element-wise bandwidth is measured as hbm_bandwidth.
  double hbm_efficiency = 1.0;
  EfficiencyCurve matmul_efficiency;
  /// Per-dtype curves that replace `matmul_efficiency` for their dtype (a calibrated device's
  /// bf16 GEMMs saturate at other sizes than its fp32 ones). Empty for the presets.
  std::map<DType, EfficiencyCurve> matmul_efficiency_by_dtype;
  /// fp8 GEMMs: their own curve (the fraction of the fp8 peak cuBLASLt reaches is lower than
  /// at 16 bits); unset: `matmul_efficiency`.
  std::optional<EfficiencyCurve> fp8_matmul_efficiency;
  /// The fused (FlashAttention-style) attention kernel's achieved fraction of the 16-bit peak,
  /// forward and backward, counting the FLOPs it executes (a causal mask skips half). Unset
  /// (`attention_given` false): the GEMM curve's maximum, stated by `info`.
  double attention_forward_efficiency = 0;
  double attention_backward_efficiency = 0;
  bool attention_given = false;
  /// Per kernel ("fa2", "fa1", "triton", "cudnn"): its curves by head dimension and causality. A
  /// kernel without curves on this GPU runs at attention_efficiency (fa2) or is refused.
  std::map<std::string, std::vector<AttentionCurve>> attention_kernels;
  /// The kernel's efficiency at this head dimension (interpolated in log₂ between the two
  /// nearest measured ones, held beyond them), causality and sequence length; nullopt when the
  /// GPU has no curves for the kernel.
  std::optional<double> attention_kernel_efficiency(const std::string& kernel, double head_dim,
                                                    bool causal, double seq) const;
  units::Seconds kernel_launch_s = 5e-6;
  /// Multipliers fitted to a team's measured runs (`stratagem calibrate --measured`, see
  /// fitted_profile.hpp): the GEMM and attention efficiencies are multiplied by them (and held
  /// at or below 1, the peak); 1 for the presets.
  /// gemm_scale: GEMMs at 16 bits and wider; fp8_gemm_scale: fp8 GEMMs (another kernel family,
  /// with its own measured maximum, fp8_matmul_efficiency).
  double gemm_scale = 1.0;
  double fp8_gemm_scale = 1.0;
  double attention_scale = 1.0;
  /// Compute runs 1 + this times slower while communication kernels run on the device (they
  /// take SMs and HBM bandwidth); unset: 0, or a profile's measured value.
  std::optional<double> comm_compute_slowdown;
  std::vector<MeasuredUnits> measured_units;  ///< from a profile; empty for the presets
  units::FlopsPerS peak(DType d) const;
  const EfficiencyCurve& efficiency(DType d) const;
  /// Fraction of peak(16-bit dtype) the fused attention kernel reaches in forward (or backward).
  double attention_efficiency(bool backward) const;
};

/// One kernel's curves (GpuSpec::attention_kernels' value) at this shape, as
/// GpuSpec::attention_kernel_efficiency; nullopt without curves.
std::optional<double> attention_curves_efficiency(const std::vector<AttentionCurve>& curves,
                                                  double head_dim, bool causal, double seq);

struct LinkSpec {
  units::BytesPerS bandwidth = 0;  ///< per GPU, per direction: the line rate
  units::Seconds latency = 0;
  /// Fraction of `bandwidth` NCCL's collectives move payload at on large messages (nccl-tests'
  /// bus bandwidth over the line rate: NVLink's packet headers and flow control, the NIC's
  /// protocol overhead); the α-β model's β uses bandwidth · efficiency. 1: the line rate.
  double efficiency = 1.0;
  units::BytesPerS effective_bandwidth() const { return bandwidth * efficiency; }
};

/// One measured operation: time(S) = alpha_s + bus_factor(op, n) · S / bus_bandwidth for a
/// buffer of S bytes (nccl-tests' size) on n ranks.
struct MeasuredComm {
  units::Seconds alpha_s = 0;
  units::BytesPerS bus_bandwidth = 0;
  /// Runs 1 + this times slower while a rank it involves computes.
  double slowdown_during_compute = 0;
  /// Extra time when it starts with no communication in flight on one of its ranks (issued
  /// after compute, its backend's threads idle), measured against a back-to-back stream.
  units::Seconds cold_start_s = 0;
};

/// Collective and point-to-point costs measured on one machine (a hardware profile's
/// "network" and "overlap" sections, see profile.hpp). When a cluster has one, the simulator
/// costs communication inside a node with these instead of the intra-node link's α-β closed
/// forms: for a group of n ranks, α is scaled by the ring's step count relative to the measured
/// group (2(n−1) for all-reduce, n−1 for the others) and β uses nccl-tests' bus factor.
struct CommCalibration {
  std::string profile;  ///< the profile it came from (name or file), shown in results
  int processes = 2;    ///< group size the collectives were measured with
  std::array<MeasuredComm, kCommOpCount> ops{};  ///< indexed by CommOp; sendrecv = one p2p message
  /// Compute runs 1 + this times slower while communication is in flight on its rank.
  double comm_compute_slowdown = 0;
  /// Communication runs 1 + this times slower while compute runs on a rank it involves (CPU
  /// cores or GPU SMs shared by both).
  double compute_comm_slowdown = 0;
  /// The backend runs a rank's collectives one at a time in issue order (Gloo here): the
  /// simulator then queues parameter gathers behind gradient reduce-scatters.
  bool serial_collectives = false;
  /// Compute shares the host: each other rank of a node computing at the same moment makes a
  /// rank's compute take 1 + this longer (linear in their number; CPU processes on shared
  /// cores). The profile's compute times hold for all `processes` computing at once.
  double compute_contention = 0;
  const MeasuredComm& at(CommOp op) const { return ops[static_cast<int>(op)]; }
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 1;
  /// GPUs that share one NVLink/NVSwitch domain (GB200 NVL72: 72 over 18 trays of 4); a
  /// multiple of gpus_per_node. Links inside a domain use `intra_node`. Default: one node.
  int nvlink_domain_gpus = 0;
  GpuSpec gpu;
  LinkSpec intra_node;
  LinkSpec inter_node;
  std::optional<CommCalibration> calibration;  ///< from a hardware profile (apply_profile)
  int world_size() const { return nodes * gpus_per_node; }
  int domain_gpus() const { return nvlink_domain_gpus > 0 ? nvlink_domain_gpus : gpus_per_node; }
  /// The NVLink domain node `node` belongs to (itself, unless a domain spans several nodes).
  int domain_of_node(int node) const {
    const int gpn = gpus_per_node > 0 ? gpus_per_node : 1;
    const int nodes_per_domain = domain_gpus() / gpn;
    return nodes_per_domain > 1 ? node / nodes_per_domain : node;
  }
};

/// The "measured_units" list of a GPU object or a profile's device (keys in microseconds).
/// Several measurements of one shape (ranks of one run, or runs) as one: every time is the
/// mean; `jitter_cv` pools the measurements' own spreads, `rank_cv` adds the spread of their
/// block times when `between_is_rank` (the measurements are ranks) and pools their `rank_cv`
/// otherwise (they are runs). Shape of the first; empty input gives {}.
MeasuredUnits average_units(const std::vector<MeasuredUnits>& list, bool between_is_rank);

std::vector<MeasuredUnits> parse_measured_units(const nlohmann::json& list,
                                                const std::string& path);
nlohmann::json measured_units_json(const std::vector<MeasuredUnits>& list);

/// Parses a GPU object (merged with its preset).
GpuSpec parse_gpu(const nlohmann::json& object, const std::string& path);
/// Parses a cluster object (merged with its preset); `gpu` may be a preset name or object.
ClusterSpec parse_cluster(const nlohmann::json& object, const std::string& path);

nlohmann::json to_json(const GpuSpec& gpu);
nlohmann::json to_json(const ClusterSpec& cluster);

}  // namespace stratagem::scenario
