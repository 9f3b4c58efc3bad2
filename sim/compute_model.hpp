#pragma once
// How long a compute op takes. The default is a roofline per kind of kernel on the
// scenario's GPU, summed because the kernels run one after another:
//   time = Σ_GEMMs flops_i / (peak(dtype) · efficiency(m_i, n_i, k_i))
//          + Σ_16-bit GEMMs flops_i / (peak(bf16) · efficiency_bf16(m_i, n_i, k_i))  (fp8: LM head)
//          + attention_flops / (peak(16-bit) · attention_efficiency(forward|backward))
//          + (bytes + gemm_bytes) / (hbm_bandwidth · hbm_efficiency) + kernels · kernel_launch_s
// where each GEMM shape of the op (its `gemms` mix; without one, every GEMM at the curve of
// `gemm_dim`) runs at curve(smallest dimension) · wave utilization (gemm_cost.hpp), `bytes` is
// the traffic of its memory-bound kernels and `gemm_bytes` its GEMMs' own operands and outputs
// (each GEMM's roofline summed: a GEMM of
// intensity I FLOP/B reaches peak / (1 + ridge / I); gemm_bytes count only with a formula
// curve, a measured curve includes them),
// and ops that run on the host (optimizer offload) use a roofline on the host's CPUs.
#include <array>
#include <optional>

#include "engine/plan/plan.hpp"
#include "engine/scenario/cluster.hpp"

namespace stratagem::sim {

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  /// Duration of the op on an otherwise idle device.
  virtual units::Seconds duration(const plan::Compute& op) const = 0;
};

/// The CPU side of a rank, for ops with `on_host` (DeepSpeed's CPU Adam).
struct HostSpec {
  units::FlopsPerS peak_flops = 0;        ///< this rank's share of the node's CPUs
  units::BytesPerS memory_bandwidth = 0;  ///< this rank's share of the node's DRAM bandwidth
};

/// A DGX A100 host split evenly over the node's GPUs. The node has two AMD EPYC 7742: per
/// socket 8 channels of DDR4-3200 (8 · 3200 MT/s · 8 B = 204.8 GB/s) and 64 Zen 2 cores at
/// 2.25 GHz base doing 32 fp32 FLOP per cycle (two 256-bit FMA pipes), 4.608 TFLOP/s.
HostSpec default_host(int gpus_per_node);

class RooflineModel final : public ComputeModel {
 public:
  /// `fp8_gemm_rate`: the fp8 GEMMs' throughput under the scenario's fp8 recipe against the
  /// GPU's per-tensor-scaled fp8 curve (scenario::fp8_gemm_rate).
  RooflineModel(scenario::GpuSpec gpu, HostSpec host, double fp8_gemm_rate = 1.0);
  units::Seconds duration(const plan::Compute& op) const override;
  const scenario::GpuSpec& gpu() const { return gpu_; }
  const HostSpec& host() const { return host_; }

 private:
  /// A GEMM efficiency times the GPU's fitted gemm_scale (fp8_gemm_scale for fp8), at most 1.
  double gemm(double efficiency, scenario::DType dtype) const;
  /// Seconds `flops` of the op's GEMMs take in `dtype`: each shape of its mix (op.gemms,
  /// those with this `wide`) at curve(smallest dimension) · wave utilization (gemm_cost.hpp),
  /// else all at curve(op.gemm_dim).
  double gemm_seconds(double flops, scenario::DType dtype, const plan::Compute& op,
                      bool wide) const;
  scenario::GpuSpec gpu_;
  HostSpec host_;
  double fp8_rate_ = 1.0;
  /// gpu_.attention_kernels by scenario::AttentionKernel (looked up once, not per op).
  std::array<std::vector<scenario::AttentionCurve>, 4> attention_curves_;
};

/// The roofline of `s`'s GPU on `host`, its fp8 GEMMs at the rate of the scenario's fp8 recipe.
RooflineModel scenario_roofline(const scenario::Scenario& s, HostSpec host);

/// With tensor parallelism the units are measured as one TP rank runs them: a unit's time is
/// its whole chain's compute (engine/workload/tp_chain.hpp), and the plan splits it into
/// pieces at the collectives. Each piece then costs the unit's measured time times its share
/// of the chain's roofline time; `roofline_s` holds that chain total per kind of unit
/// (embedding, block, head) and direction (backward 0, forward 1).
struct TpChainRoofline {
  std::array<std::array<double, 2>, 3> roofline_s{};
  /// Zero-bubble schedules: the B pass's chain (the backward's without the weight gradients).
  std::array<double, 3> input_s{};
  bool full_recompute = false;  ///< recompute ops are pieces of the forward chain
};

/// Measured unit times where a profile has them for the scenario's shape
/// (scenario::MeasuredUnits): forward and backward ops cost the sum of their units' measured times
/// (0 embedding, 1..L blocks, `head_unit` head), a full recompute its blocks' forwards, the
/// optimizer its parameters times the measured time per parameter; everything else, and ops
/// on the host, fall back to the roofline. With `tp` the forward, backward and full-recompute
/// ops are pieces of TP chains, costed as TpChainRoofline says.
class MeasuredUnitsModel final : public ComputeModel {
 public:
  MeasuredUnitsModel(scenario::MeasuredUnits units, int head_unit, RooflineModel fallback,
                     std::optional<TpChainRoofline> tp = std::nullopt)
      : units_(std::move(units)),
        head_unit_(head_unit),
        fallback_(std::move(fallback)),
        tp_(std::move(tp)) {}
  units::Seconds duration(const plan::Compute& op) const override;
  /// Zero-bubble schedules: the W pass's share of a unit's measured backward, by unit kind
  /// (embedding, block, head); the B pass takes the rest.
  void set_weight_share(std::array<double, 3> share) { weight_share_ = share; }

 private:
  double measured(int unit, bool forward) const;
  std::array<double, 3> weight_share_{};
  scenario::MeasuredUnits units_;
  int head_unit_;
  RooflineModel fallback_;
  std::optional<TpChainRoofline> tp_;
};

}  // namespace stratagem::sim
