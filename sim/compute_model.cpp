#include "sim/compute_model.hpp"

#include <algorithm>

#include "sim/gemm_cost.hpp"

namespace stratagem::sim {

namespace {
constexpr int kSocketsPerNode = 2;              // DGX A100: 2 × AMD EPYC 7742
constexpr double kMemoryChannelsPerSocket = 8;  // DDR4-3200
constexpr double kTransfersPerS = 3200e6;       // DDR4-3200: 3200 MT/s
constexpr double kBytesPerTransfer = 8;         // 64-bit channel
constexpr double kCoresPerSocket = 64;
constexpr double kCoreClockHz = 2.25 * units::kGiga;
constexpr double kFp32FlopPerCycle = 32;  // 2 FMA pipes × 8 fp32 lanes × 2 FLOP
}  // namespace

HostSpec default_host(int gpus_per_node) {
  const double share = 1.0 / std::max(gpus_per_node, 1);
  HostSpec h;
  h.memory_bandwidth =
      kSocketsPerNode * kMemoryChannelsPerSocket * kTransfersPerS * kBytesPerTransfer * share;
  h.peak_flops = kSocketsPerNode * kCoresPerSocket * kCoreClockHz * kFp32FlopPerCycle * share;
  return h;
}

RooflineModel::RooflineModel(scenario::GpuSpec gpu, HostSpec host, double fp8_gemm_rate)
    : gpu_(std::move(gpu)), host_(host), fp8_rate_(fp8_gemm_rate) {
  static_assert(static_cast<std::size_t>(scenario::AttentionKernel::cudnn) + 1 ==
                    std::tuple_size_v<decltype(attention_curves_)>,
                "one curve list per scenario::AttentionKernel");
  for (auto k : {scenario::AttentionKernel::fa2, scenario::AttentionKernel::fa1,
                 scenario::AttentionKernel::triton, scenario::AttentionKernel::cudnn}) {
    const auto it = gpu_.attention_kernels.find(scenario::to_string(k));
    if (it != gpu_.attention_kernels.end()) attention_curves_[static_cast<int>(k)] = it->second;
  }
}

double RooflineModel::gemm(double efficiency, scenario::DType dtype) const {
  const double scale = dtype == scenario::DType::fp8 ? gpu_.fp8_gemm_scale : gpu_.gemm_scale;
  return std::min(1.0, efficiency * scale);
}

double RooflineModel::gemm_seconds(double flops, scenario::DType dtype, const plan::Compute& op,
                                   bool wide) const {
  if (flops <= 0) return 0.0;
  const double peak = gpu_.peak(dtype) * (dtype == scenario::DType::fp8 ? fp8_rate_ : 1.0);
  if (peak <= 0) return 0.0;
  const scenario::EfficiencyCurve& curve = gpu_.efficiency(dtype);
  // Each shape at its own efficiency: the op's FLOPs times the mix's time per FLOP.
  double mix_flops = 0, mix_s = 0;
  if (op.gemms) {
    for (const workload::GemmShape& g : *op.gemms) {
      if (g.wide != wide || g.flops <= 0) continue;
      const double e = gemm(curve.at(std::min({g.m, g.n, g.k})), dtype) *
                       wave_utilization(g.m, g.n, g.k, gpu_.sm_count);
      mix_flops += g.flops;
      mix_s += e > 0 ? g.flops / e : 0.0;
    }
  }
  if (mix_flops > 0) return flops * (mix_s / mix_flops) / peak;
  const double efficiency = gemm(op.gemm_dim > 0 ? curve.at(op.gemm_dim) : curve.max, dtype);
  return efficiency > 0 ? flops / (peak * efficiency) : 0.0;
}

units::Seconds RooflineModel::duration(const plan::Compute& op) const {
  if (op.on_host) {
    const double compute_s = host_.peak_flops > 0 ? op.flops / host_.peak_flops : 0.0;
    const double memory_s = host_.memory_bandwidth > 0 ? op.bytes / host_.memory_bandwidth : 0.0;
    return std::max(compute_s, memory_s);
  }
  // A roofline per kernel class, summed: the op's GEMMs reach efficiency(d) of the peak for
  // their smallest dimension d, and its memory-bound kernels (norms, softmax, activations,
  // residual adds, optimizer updates) move `bytes` through HBM. The two kinds of kernel run
  // one after the other on the stream, so their times add.
  const scenario::EfficiencyCurve& curve = gpu_.efficiency(op.dtype);
  double compute_s = gemm_seconds(op.flops, op.dtype, op, false);
  // Under fp8 the LM head's GEMMs and the attention core run in bf16 (Transformer Engine).
  const scenario::DType wide = op.dtype == scenario::DType::fp8 ? scenario::DType::bf16 : op.dtype;
  if (op.flops_16bit > 0) compute_s += gemm_seconds(op.flops_16bit, wide, op, true);
  if (op.attention_flops > 0) {
    const bool backward = op.phase == plan::Phase::backward ||
                          op.phase == plan::Phase::backward_input ||
                          op.phase == plan::Phase::backward_weight;
    // The kernel's published forward + backward rate at this shape where the GPU has it,
    // else the GPU's single attention efficiency.
    const auto curve_eff = op.attention_seq > 0 && op.head_dim > 0
                               ? scenario::attention_curves_efficiency(
                                     attention_curves_[static_cast<int>(op.attention_kernel)],
                                     op.head_dim, op.causal, op.attention_seq)
                               : std::nullopt;
    const double eff = curve_eff ? *curve_eff : gpu_.attention_efficiency(backward);
    const double pa = gpu_.peak(wide) * std::min(1.0, eff * gpu_.attention_scale);
    compute_s += pa > 0 ? op.attention_flops / pa : 0.0;
  }
  // A formula curve is the GEMMs' compute side only: their operands and outputs cross HBM
  // too (a measured curve's rates already include that traffic).
  const double bytes = op.bytes + (curve.table.empty() ? op.gemm_bytes : 0.0);
  const double hbm = gpu_.hbm_bandwidth * gpu_.hbm_efficiency;
  const double memory_s = hbm > 0 ? bytes / hbm : 0.0;
  return compute_s + memory_s + op.kernels * gpu_.kernel_launch_s;
}

RooflineModel scenario_roofline(const scenario::Scenario& s, HostSpec host) {
  return RooflineModel(s.cluster.gpu, host,
                       scenario::fp8_gemm_rate(s.strategy.fp8_recipe, s.cluster.gpu.mx_formats));
}

double MeasuredUnitsModel::measured(int u, bool forward) const {
  const auto& m = units_;
  if (u == 0) return forward ? m.embedding_forward : m.embedding_backward;
  if (u == head_unit_) return forward ? m.head_forward : m.head_backward;
  return forward ? m.block_forward : m.block_backward;
}

units::Seconds MeasuredUnitsModel::duration(const plan::Compute& op) const {
  if (op.on_host) return fallback_.duration(op);
  const auto& m = units_;
  auto sum = [&](bool forward) {
    double t = 0;
    for (int u = op.unit_begin; u < op.unit_end; ++u) t += measured(u, forward);
    return t;
  };
  // A piece of a unit's TP chain: the unit's measured time × the piece's roofline share.
  const bool piece = op.phase == plan::Phase::forward || op.phase == plan::Phase::backward ||
                     op.phase == plan::Phase::backward_input ||
                     (op.phase == plan::Phase::recompute && tp_ && tp_->full_recompute);
  if (tp_ && piece && op.unit_end == op.unit_begin + 1) {
    const bool forward = op.phase == plan::Phase::forward || op.phase == plan::Phase::recompute;
    const int u = op.unit_begin;
    const int kind = u == 0 ? 0 : (u == head_unit_ ? 2 : 1);
    // A B pass's piece: its share of the B chain, which takes the backward's 1 − W share.
    const bool input = op.phase == plan::Phase::backward_input;
    const double total = input ? tp_->input_s[kind] : tp_->roofline_s[kind][forward ? 1 : 0];
    const double scale = input ? 1.0 - weight_share_[kind] : 1.0;
    return total > 0 ? measured(u, forward) * scale * fallback_.duration(op) / total
                     : fallback_.duration(op);
  }
  switch (op.phase) {
    case plan::Phase::forward:
      return sum(true);
    case plan::Phase::backward:
      return sum(false);
    case plan::Phase::backward_input:
    case plan::Phase::backward_weight: {
      // A zero-bubble pass: its share of the units' measured backward.
      const bool weight = op.phase == plan::Phase::backward_weight;
      double t = 0;
      for (int u = op.unit_begin; u < op.unit_end; ++u) {
        const double w = weight_share_[u == 0 ? 0 : (u == head_unit_ ? 2 : 1)];
        t += measured(u, false) * (weight ? w : 1.0 - w);
      }
      return t;
    }
    case plan::Phase::recompute: {
      // A full recompute reruns the block's forward; selective only the attention core.
      const plan::Compute full = [&] {
        plan::Compute c = op;
        c.phase = plan::Phase::forward;
        return c;
      }();
      const double roof_full = fallback_.duration(full), roof = fallback_.duration(op);
      return roof_full > 0 ? sum(true) * std::min(1.0, roof / roof_full) : roof;
    }
    case plan::Phase::optimizer:
      if (m.optimizer_per_param > 0 && op.params > 0) return op.params * m.optimizer_per_param;
      return fallback_.duration(op);
    default:
      return fallback_.duration(op);
  }
}

}  // namespace stratagem::sim
