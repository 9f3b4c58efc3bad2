#include "engine/scenario/cluster.hpp"

#include <algorithm>
#include <cmath>

#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/presets.hpp"

namespace stratagem::scenario {

const char* to_string(DType d) {
  switch (d) {
    case DType::fp32:
      return "fp32";
    case DType::tf32:
      return "tf32";
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    case DType::fp8:
      return "fp8";
  }
  return "?";
}

double dtype_bytes(DType d) {
  if (d == DType::fp8) return 1.0;
  return d == DType::fp16 || d == DType::bf16 ? 2.0 : 4.0;
}

units::FlopsPerS GpuSpec::peak(DType d) const {
  switch (d) {
    case DType::fp32:
      return peak_fp32;
    case DType::tf32:
      return peak_tf32;
    case DType::fp16:
      return peak_fp16;
    case DType::bf16:
      return peak_bf16;
    case DType::fp8:
      return peak_fp8;
  }
  return peak_fp32;
}

double EfficiencyCurve::at(double d) const {
  if (table.empty()) return max * d / (d + half_dim);
  if (d <= table.front().first) return table.front().second;
  if (d >= table.back().first) return table.back().second;
  const auto hi = std::lower_bound(table.begin(), table.end(), d,
                                   [](const auto& point, double v) { return point.first < v; });
  const auto lo = hi - 1;
  const double f = std::log(d / lo->first) / std::log(hi->first / lo->first);
  return lo->second + f * (hi->second - lo->second);
}

const EfficiencyCurve& GpuSpec::efficiency(DType d) const {
  const auto it = matmul_efficiency_by_dtype.find(d);
  if (it != matmul_efficiency_by_dtype.end()) return it->second;
  if (d == DType::fp8 && fp8_matmul_efficiency) return *fp8_matmul_efficiency;
  return matmul_efficiency;
}

double GpuSpec::attention_efficiency(bool backward) const {
  if (!attention_given) return matmul_efficiency.max;
  return backward ? attention_backward_efficiency : attention_forward_efficiency;
}

std::optional<double> GpuSpec::attention_kernel_efficiency(const std::string& kernel,
                                                           double head_dim, bool causal,
                                                           double seq) const {
  const auto it = attention_kernels.find(kernel);
  if (it == attention_kernels.end()) return std::nullopt;
  return attention_curves_efficiency(it->second, head_dim, causal, seq);
}

std::optional<double> attention_curves_efficiency(const std::vector<AttentionCurve>& curves,
                                                  double head_dim, bool causal, double seq) {
  if (curves.empty()) return std::nullopt;
  const AttentionCurve* below = nullptr;
  const AttentionCurve* above = nullptr;
  for (const auto& c : curves) {
    if (c.causal != causal) continue;
    if (c.head_dim <= head_dim && (!below || c.head_dim > below->head_dim)) below = &c;
    if (c.head_dim >= head_dim && (!above || c.head_dim < above->head_dim)) above = &c;
  }
  if (!below && !above) {
    // Only the other causality measured: use it rather than nothing.
    for (const auto& c : curves) {
      if (c.head_dim <= head_dim && (!below || c.head_dim > below->head_dim)) below = &c;
      if (c.head_dim >= head_dim && (!above || c.head_dim < above->head_dim)) above = &c;
    }
  }
  if (!below) return above->at(seq);
  if (!above || above == below) return below->at(seq);
  const double f = std::log2(head_dim / below->head_dim) /
                   std::log2(static_cast<double>(above->head_dim) / below->head_dim);
  return below->at(seq) + f * (above->at(seq) - below->at(seq));
}

namespace {

constexpr DType kDTypes[] = {DType::fp32, DType::tf32, DType::fp16, DType::bf16, DType::fp8};

EfficiencyCurve parse_curve(const nlohmann::json& object, const std::string& path,
                            EfficiencyCurve curve) {
  ObjectReader e(object, path);
  // Where the numbers come from, and a fitted maximum's value before the fit (bench/
  // fit_defaults.py checks a fit against it); neither changes the curve.
  e.allow_text({"source"});
  e.allow({"prior"});
  curve.max = e.number_or("max", curve.max, 0.01, 1.0);
  curve.half_dim = e.number_or("half_dim", curve.half_dim, 0, 1e6);
  if (const nlohmann::json* table = e.find("table")) {
    const std::string at = e.child_path("table");
    if (!table->is_array()) throw SpecError(at, "expected an array of [dim, efficiency] pairs");
    curve.table.clear();
    for (std::size_t i = 0; i < table->size(); ++i) {
      const auto& pair = (*table)[i];
      const std::string where = at + "[" + std::to_string(i) + "]";
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number()) {
        throw SpecError(where, "expected [dim, efficiency]");
      }
      const double d = pair[0].get<double>(), eff = pair[1].get<double>();
      if (!(d > 0) || !(eff > 0) || eff > 100) {
        throw SpecError(where, "needs dim > 0 and 0 < efficiency <= 100");
      }
      if (!curve.table.empty() && d <= curve.table.back().first) {
        throw SpecError(where, "dims must increase");
      }
      curve.table.emplace_back(d, eff);
    }
  }
  e.finish();
  return curve;
}

nlohmann::json curve_json(const EfficiencyCurve& c) {
  nlohmann::json j = {{"max", c.max}, {"half_dim", c.half_dim}};
  if (!c.table.empty()) {
    nlohmann::json t = nlohmann::json::array();
    for (const auto& [d, e] : c.table) t.push_back({d, e});
    j["table"] = std::move(t);
  }
  return j;
}

}  // namespace

MeasuredUnits average_units(const std::vector<MeasuredUnits>& list, bool between_is_rank) {
  MeasuredUnits m;
  if (list.empty()) return m;
  m.shape = list.front().shape;
  const double n = static_cast<double>(list.size());
  double mean_block = 0, mean_square = 0, within = 0, between = 0;
  for (const auto& u : list) {
    m.embedding_forward += u.embedding_forward / n;
    m.embedding_backward += u.embedding_backward / n;
    m.block_forward += u.block_forward / n;
    m.block_backward += u.block_backward / n;
    m.head_forward += u.head_forward / n;
    m.head_backward += u.head_backward / n;
    m.optimizer_per_param += u.optimizer_per_param / n;
    const double block = u.block_forward + u.block_backward;
    mean_block += block / n;
    mean_square += block * block / n;
    within += (u.jitter_cv * block) * (u.jitter_cv * block) / n;
    between += (u.rank_cv * block) * (u.rank_cv * block) / n;
  }
  if (between_is_rank) between = std::max(0.0, mean_square - mean_block * mean_block);
  m.jitter_cv = mean_block > 0 ? std::sqrt(within) / mean_block : 0;
  m.rank_cv = mean_block > 0 ? std::sqrt(between) / mean_block : 0;
  return m;
}

std::vector<MeasuredUnits> parse_measured_units(const nlohmann::json& list,
                                                const std::string& path) {
  if (!list.is_array()) throw SpecError(path, "expected an array");
  std::vector<MeasuredUnits> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader r(list[i], path + "[" + std::to_string(i) + "]");
    MeasuredUnits m;
    m.shape = r.string("shape");
    auto us = [&](const char* key) { return units::us_to_s(r.number(key, 0, 1e12)); };
    m.embedding_forward = us("embedding_forward_us");
    m.embedding_backward = us("embedding_backward_us");
    m.block_forward = us("block_forward_us");
    m.block_backward = us("block_backward_us");
    m.head_forward = us("head_forward_us");
    m.head_backward = us("head_backward_us");
    m.optimizer_per_param = r.number_or("optimizer_ns_per_param", 0, 0, 1e9) * 1e-9;
    m.jitter_cv = r.number_or("jitter_cv", 0, 0, 10);
    m.rank_cv = r.number_or("rank_cv", 0, 0, 10);
    r.finish();
    out.push_back(std::move(m));
  }
  return out;
}

nlohmann::json measured_units_json(const std::vector<MeasuredUnits>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : list) {
    out.push_back({{"shape", m.shape},
                   {"embedding_forward_us", m.embedding_forward / units::kMicro},
                   {"embedding_backward_us", m.embedding_backward / units::kMicro},
                   {"block_forward_us", m.block_forward / units::kMicro},
                   {"block_backward_us", m.block_backward / units::kMicro},
                   {"head_forward_us", m.head_forward / units::kMicro},
                   {"head_backward_us", m.head_backward / units::kMicro},
                   {"optimizer_ns_per_param", m.optimizer_per_param * 1e9},
                   {"jitter_cv", m.jitter_cv},
                   {"rank_cv", m.rank_cv}});
  }
  return out;
}

GpuSpec parse_gpu(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  r.allow({"preset"});
  r.allow_text({"description", "source"});
  GpuSpec g;
  g.name = r.string_or("name", "custom");
  if (r.has("memory_GiB")) {
    g.memory_bytes = units::gib_to_bytes(r.number("memory_GiB", 1e-3, 1e6));
  } else {
    g.memory_bytes = r.number("memory_bytes", 1e6, 1e15);
  }
  const nlohmann::json* peak = r.find("peak_tflops");
  if (!peak) throw SpecError(r.child_path("peak_tflops"), "missing required key");
  ObjectReader p(*peak, r.child_path("peak_tflops"));
  g.peak_fp32 = units::tflops_to_flops(p.number("fp32", 1e-6, 1e6));
  g.peak_tf32 = units::tflops_to_flops(p.number_or("tf32", g.peak_fp32 / units::kTera, 1e-6, 1e6));
  g.peak_fp16 = units::tflops_to_flops(p.number_or("fp16", g.peak_fp32 / units::kTera, 1e-6, 1e6));
  g.peak_bf16 = units::tflops_to_flops(p.number_or("bf16", g.peak_fp16 / units::kTera, 1e-6, 1e6));
  if (p.has("fp8")) g.peak_fp8 = units::tflops_to_flops(p.number("fp8", 1e-6, 1e6));
  p.finish();
  g.hbm_bandwidth = units::gbps_to_bytes_per_s(r.number("hbm_GBps", 1e-3, 1e6));
  if (const nlohmann::json* he = r.find("hbm_efficiency")) {
    ObjectReader e(*he, r.child_path("hbm_efficiency"));
    e.allow_text({"source"});
    g.hbm_efficiency = e.number("value", 0.05, 1.0);
    e.finish();
  }
  if (const nlohmann::json* sm = r.find("sm_count")) {
    ObjectReader e(*sm, r.child_path("sm_count"));
    e.allow_text({"source"});
    g.sm_count = static_cast<int>(e.integer("value", 1, 100000));
    e.finish();
  }
  if (const nlohmann::json* eff = r.find("matmul_efficiency")) {
    g.matmul_efficiency = parse_curve(*eff, r.child_path("matmul_efficiency"), g.matmul_efficiency);
  }
  if (const nlohmann::json* by = r.find("matmul_efficiency_by_dtype")) {
    ObjectReader b(*by, r.child_path("matmul_efficiency_by_dtype"));
    for (DType d : kDTypes) {
      if (const nlohmann::json* c = b.find(to_string(d))) {
        g.matmul_efficiency_by_dtype[d] = parse_curve(*c, b.child_path(to_string(d)), {});
      }
    }
    b.finish();
  }
  if (const nlohmann::json* eff = r.find("fp8_matmul_efficiency")) {
    if (g.peak_fp8 <= 0) {
      throw SpecError(r.child_path("fp8_matmul_efficiency"),
                      "the GPU has no fp8 peak (peak_tflops.fp8)");
    }
    g.fp8_matmul_efficiency =
        parse_curve(*eff, r.child_path("fp8_matmul_efficiency"), g.matmul_efficiency);
  }
  if (const nlohmann::json* att = r.find("attention_efficiency")) {
    ObjectReader a(*att, r.child_path("attention_efficiency"));
    a.allow_text({"source"});
    g.attention_forward_efficiency = a.number("forward", 0.01, 1.0);
    g.attention_backward_efficiency = a.number("backward", 0.01, 1.0);
    g.attention_given = true;
    a.finish();
  }
  if (const nlohmann::json* ak = r.find("attention_kernels")) {
    ObjectReader k(*ak, r.child_path("attention_kernels"));
    k.allow_text({"source"});
    for (const char* name : {"fa2", "fa1", "triton", "cudnn"}) {
      const nlohmann::json* list = k.find(name);
      if (!list) continue;
      const std::string lpath = k.child_path(name);
      if (!list->is_array() || list->empty()) throw SpecError(lpath, "expected a non-empty array");
      for (std::size_t i = 0; i < list->size(); ++i) {
        ObjectReader c((*list)[i], lpath + "[" + std::to_string(i) + "]");
        AttentionCurve curve;
        curve.head_dim = static_cast<int>(c.integer("head_dim", 1, 1024));
        curve.causal = c.boolean_or("causal", true);
        curve.max = c.number("max", 0.01, 1.0);
        curve.half_seq = c.number_or("half_seq", 0, 0, 1e7);
        c.finish();
        g.attention_kernels[name].push_back(curve);
      }
    }
    k.finish();
  }
  g.mx_formats = r.boolean_or("mx_formats", false);
  if (g.mx_formats && g.peak_fp8 <= 0) {
    throw SpecError(r.child_path("mx_formats"), "the GPU has no fp8 peak (peak_tflops.fp8)");
  }
  g.kernel_launch_s = units::us_to_s(r.number_or("kernel_launch_us", 5.0, 0, 1e6));
  g.gemm_scale = r.number_or("gemm_scale", 1.0, 0.01, 100);
  g.fp8_gemm_scale = r.number_or("fp8_gemm_scale", 1.0, 0.01, 100);
  g.attention_scale = r.number_or("attention_scale", 1.0, 0.01, 100);
  if (r.has("comm_compute_slowdown")) {
    g.comm_compute_slowdown = r.number("comm_compute_slowdown", 0, 100);
  }
  if (const nlohmann::json* mu = r.find("measured_units")) {
    g.measured_units = parse_measured_units(*mu, r.child_path("measured_units"));
  }
  r.finish();
  return g;
}

namespace {

LinkSpec parse_link(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  r.allow_text({"description", "source"});
  LinkSpec l;
  l.bandwidth = units::gbps_to_bytes_per_s(r.number("bandwidth_GBps", 1e-6, 1e6));
  l.latency = units::us_to_s(r.number_or("latency_us", 0.0, 0, 1e7));
  if (const nlohmann::json* eff = r.find("efficiency")) {
    ObjectReader e(*eff, r.child_path("efficiency"));
    e.allow_text({"source"});
    l.efficiency = e.number("value", 0.05, 1.0);
    e.finish();
  }
  r.finish();
  return l;
}

CommCalibration parse_calibration(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  CommCalibration c;
  c.profile = r.string_or("profile", "");
  c.processes = static_cast<int>(r.integer("processes", 2, 1 << 20));
  c.comm_compute_slowdown = r.number_or("comm_compute_slowdown", 0.0, 0, 1e3);
  c.compute_comm_slowdown = r.number_or("compute_comm_slowdown", 0.0, 0, 1e3);
  c.serial_collectives = r.boolean_or("serial_collectives", false);
  c.compute_contention = r.number_or("compute_contention", 0.0, 0, 1e3);
  for (int i = 0; i < kCommOpCount; ++i) {
    const char* name = to_string(static_cast<CommOp>(i));
    const nlohmann::json* op = r.find(name);
    if (!op) throw SpecError(r.child_path(name), "missing required key");
    ObjectReader o(*op, r.child_path(name));
    c.ops[i].alpha_s = units::us_to_s(o.number("alpha_us", 0, 1e9));
    c.ops[i].bus_bandwidth = units::gbps_to_bytes_per_s(o.number("busbw_GBps", 1e-9, 1e9));
    c.ops[i].slowdown_during_compute =
        o.number_or("slowdown_during_compute", c.compute_comm_slowdown, 0, 1e3);
    c.ops[i].cold_start_s = units::us_to_s(o.number_or("cold_start_us", 0, 0, 1e9));
    o.finish();
  }
  r.finish();
  return c;
}

}  // namespace

ClusterSpec parse_cluster(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  r.allow({"preset"});
  r.allow_text({"description", "source"});
  ClusterSpec c;
  c.name = r.string_or("name", "custom");
  c.nodes = static_cast<int>(r.integer_or("nodes", 1, 1, 1 << 20));
  c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 1, 1024));
  if (r.has("nvlink_domain_gpus")) {
    c.nvlink_domain_gpus = static_cast<int>(r.integer("nvlink_domain_gpus", 1, 1 << 20));
    if (c.nvlink_domain_gpus % c.gpus_per_node != 0) {
      throw SpecError(r.child_path("nvlink_domain_gpus"),
                      std::to_string(c.nvlink_domain_gpus) +
                          " must be a multiple of gpus_per_node (" +
                          std::to_string(c.gpus_per_node) + "): a domain is whole nodes");
    }
  }
  const nlohmann::json* gpu = r.find("gpu");
  if (!gpu) throw SpecError(r.child_path("gpu"), "missing required key");
  c.gpu =
      parse_gpu(resolve_preset(PresetKind::gpu, *gpu, r.child_path("gpu")), r.child_path("gpu"));
  const nlohmann::json* intra = r.find("intra_node");
  if (!intra) throw SpecError(r.child_path("intra_node"), "missing required key");
  c.intra_node = parse_link(*intra, r.child_path("intra_node"));
  if (const nlohmann::json* inter = r.find("inter_node")) {
    c.inter_node = parse_link(*inter, r.child_path("inter_node"));
  } else if (c.nodes > 1) {
    throw SpecError(r.child_path("inter_node"), "required when nodes > 1");
  } else {
    c.inter_node = c.intra_node;
  }
  if (const nlohmann::json* cal = r.find("calibration")) {
    c.calibration = parse_calibration(*cal, r.child_path("calibration"));
  }
  r.finish();
  return c;
}

nlohmann::json to_json(const GpuSpec& g) {
  nlohmann::json j = {{"name", g.name},
                      {"memory_bytes", g.memory_bytes},
                      {"peak_tflops",
                       {{"fp32", g.peak_fp32 / units::kTera},
                        {"tf32", g.peak_tf32 / units::kTera},
                        {"fp16", g.peak_fp16 / units::kTera},
                        {"bf16", g.peak_bf16 / units::kTera}}},
                      {"hbm_GBps", g.hbm_bandwidth / units::kGB},
                      {"matmul_efficiency", curve_json(g.matmul_efficiency)},
                      {"kernel_launch_us", g.kernel_launch_s / units::kMicro}};
  if (g.peak_fp8 > 0) j["peak_tflops"]["fp8"] = g.peak_fp8 / units::kTera;
  if (g.fp8_matmul_efficiency) j["fp8_matmul_efficiency"] = curve_json(*g.fp8_matmul_efficiency);
  if (g.attention_given) {
    j["attention_efficiency"] = {{"forward", g.attention_forward_efficiency},
                                 {"backward", g.attention_backward_efficiency}};
  }
  if (!g.matmul_efficiency_by_dtype.empty()) {
    nlohmann::json& by = j["matmul_efficiency_by_dtype"] = nlohmann::json::object();
    for (const auto& [d, c] : g.matmul_efficiency_by_dtype) by[to_string(d)] = curve_json(c);
  }
  if (!g.attention_kernels.empty()) {
    nlohmann::json& ak = j["attention_kernels"] = nlohmann::json::object();
    for (const auto& [name, curves] : g.attention_kernels) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& c : curves) {
        list.push_back({{"head_dim", c.head_dim},
                        {"causal", c.causal},
                        {"max", c.max},
                        {"half_seq", c.half_seq}});
      }
      ak[name] = std::move(list);
    }
  }
  if (g.mx_formats) j["mx_formats"] = true;
  if (g.hbm_efficiency != 1.0) j["hbm_efficiency"] = {{"value", g.hbm_efficiency}};
  if (g.sm_count > 0) j["sm_count"] = {{"value", g.sm_count}};
  if (g.gemm_scale != 1.0) j["gemm_scale"] = g.gemm_scale;
  if (g.fp8_gemm_scale != 1.0) j["fp8_gemm_scale"] = g.fp8_gemm_scale;
  if (g.attention_scale != 1.0) j["attention_scale"] = g.attention_scale;
  if (g.comm_compute_slowdown) j["comm_compute_slowdown"] = *g.comm_compute_slowdown;
  if (!g.measured_units.empty()) j["measured_units"] = measured_units_json(g.measured_units);
  return j;
}

nlohmann::json to_json(const ClusterSpec& c) {
  auto link = [](const LinkSpec& l) {
    nlohmann::json j{{"bandwidth_GBps", l.bandwidth / units::kGB},
                     {"latency_us", l.latency / units::kMicro}};
    if (l.efficiency != 1.0) j["efficiency"] = {{"value", l.efficiency}};
    return j;
  };
  nlohmann::json j = {{"name", c.name},
                      {"nodes", c.nodes},
                      {"gpus_per_node", c.gpus_per_node},
                      {"gpu", to_json(c.gpu)},
                      {"intra_node", link(c.intra_node)},
                      {"inter_node", link(c.inter_node)}};
  if (c.nvlink_domain_gpus > 0) j["nvlink_domain_gpus"] = c.nvlink_domain_gpus;
  if (c.calibration) {
    const CommCalibration& cal = *c.calibration;
    nlohmann::json k = {{"profile", cal.profile},
                        {"processes", cal.processes},
                        {"comm_compute_slowdown", cal.comm_compute_slowdown},
                        {"compute_comm_slowdown", cal.compute_comm_slowdown},
                        {"serial_collectives", cal.serial_collectives},
                        {"compute_contention", cal.compute_contention}};
    for (int i = 0; i < kCommOpCount; ++i) {
      k[to_string(static_cast<CommOp>(i))] = {
          {"alpha_us", cal.ops[i].alpha_s / units::kMicro},
          {"busbw_GBps", cal.ops[i].bus_bandwidth / units::kGB},
          {"slowdown_during_compute", cal.ops[i].slowdown_during_compute},
          {"cold_start_us", cal.ops[i].cold_start_s / units::kMicro}};
    }
    j["calibration"] = std::move(k);
  }
  return j;
}

}  // namespace stratagem::scenario
