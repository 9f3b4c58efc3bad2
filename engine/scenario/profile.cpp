#include "engine/scenario/profile.hpp"

#include <algorithm>
#include <fstream>

#include "engine/scenario/document_format.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {

namespace {

constexpr DType kDTypes[] = {DType::fp32, DType::tf32, DType::fp16, DType::bf16};
constexpr double kMaxRate = 1e18;

std::vector<SizePoint> parse_size_points(ObjectReader& r) {
  std::vector<SizePoint> out;
  const nlohmann::json* points = r.find("points");
  if (!points) return out;
  if (!points->is_array()) throw SpecError(r.child_path("points"), "expected an array");
  for (std::size_t i = 0; i < points->size(); ++i) {
    ObjectReader p((*points)[i], r.child_path("points") + "[" + std::to_string(i) + "]");
    SizePoint s;
    s.bytes = p.number("bytes", 0, 1e18);
    s.seconds = units::us_to_s(p.number("us", 0, 1e12));
    p.finish();
    out.push_back(s);
  }
  return out;
}

nlohmann::json size_points_json(const std::vector<SizePoint>& points) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : points) a.push_back({{"bytes", p.bytes}, {"us", p.seconds / units::kMicro}});
  return a;
}

MatmulProfile parse_matmul(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  MatmulProfile m;
  m.peak = units::tflops_to_flops(r.number("peak_tflops", 1e-9, 1e9));
  m.half_dim = r.number("half_dim", 0, 1e7);
  m.rms_rel_error = r.number_or("rms_rel_error", 0, 0, 1e9);
  if (const nlohmann::json* points = r.find("points")) {
    if (!points->is_array()) throw SpecError(r.child_path("points"), "expected an array");
    for (std::size_t i = 0; i < points->size(); ++i) {
      ObjectReader p((*points)[i], r.child_path("points") + "[" + std::to_string(i) + "]");
      MatmulPoint q;
      q.m = p.number("m", 1, 1e9);
      q.n = p.number("n", 1, 1e9);
      q.k = p.number("k", 1, 1e9);
      q.flops_per_s = units::tflops_to_flops(p.number("tflops", 0, 1e9));
      p.finish();
      m.points.push_back(q);
    }
  }
  r.finish();
  return m;
}

nlohmann::json matmul_json(const MatmulProfile& m) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : m.points) {
    points.push_back(
        {{"m", p.m}, {"n", p.n}, {"k", p.k}, {"tflops", p.flops_per_s / units::kTera}});
  }
  return {{"peak_tflops", m.peak / units::kTera},
          {"half_dim", m.half_dim},
          {"rms_rel_error", m.rms_rel_error},
          {"points", std::move(points)}};
}

ProfileMachine parse_machine(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  ProfileMachine m;
  m.cpu_model = r.string_or("cpu_model", "");
  m.nproc = static_cast<int>(r.integer_or("nproc", 0, 0, 1 << 24));
  m.memory_bytes = units::gib_to_bytes(r.number_or("memory_GiB", 0, 0, 1e9));
  m.hostname = r.string_or("hostname", "");
  m.device = r.string_or("device", "");
  m.backend = r.string_or("backend", "");
  m.processes = static_cast<int>(r.integer_or("processes", 1, 1, 1 << 24));
  m.threads_per_process = static_cast<int>(r.integer_or("threads_per_process", 1, 1, 1 << 16));
  m.date = r.string_or("date", "");
  m.stratagem_version = r.string_or("stratagem_version", "");
  m.torch_version = r.string_or("torch_version", "");
  m.duration_s = r.number_or("duration_s", 0, 0, 1e9);
  m.quick = r.boolean_or("quick", false);
  m.load_average = r.number_or("load_average", 0, 0, 1e6);
  r.finish();
  return m;
}

DeviceProfile parse_device(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  DeviceProfile d;
  d.memory_bytes = units::gib_to_bytes(r.number("memory_GiB", 1e-6, 1e9));
  d.kernel_launch_s = units::us_to_s(r.number("kernel_launch_us", 0, 1e6));
  const nlohmann::json* matmul = r.find("matmul");
  if (!matmul) throw SpecError(r.child_path("matmul"), "missing required key");
  ObjectReader m(*matmul, r.child_path("matmul"));
  if (!m.has("fp32")) throw SpecError(m.child_path("fp32"), "missing required key");
  for (DType t : kDTypes) {
    if (const nlohmann::json* one = m.find(to_string(t))) {
      d.matmul[t] = parse_matmul(*one, m.child_path(to_string(t)));
    }
  }
  m.finish();
  const nlohmann::json* ew = r.find("elementwise");
  if (!ew) throw SpecError(r.child_path("elementwise"), "missing required key");
  ObjectReader e(*ew, r.child_path("elementwise"));
  d.elementwise.bandwidth = units::gbps_to_bytes_per_s(e.number("GBps", 1e-9, 1e9));
  d.elementwise.launch_s = units::us_to_s(e.number_or("launch_us", 0, 0, 1e6));
  d.elementwise.rms_rel_error = e.number_or("rms_rel_error", 0, 0, 1e9);
  d.elementwise.points = parse_size_points(e);
  e.finish();
  if (const nlohmann::json* mu = r.find("units")) {
    d.units = parse_measured_units(*mu, r.child_path("units"));
  }
  r.finish();
  return d;
}

NetworkProfile parse_network(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  NetworkProfile n;
  n.backend = r.string_or("backend", "");
  n.processes = static_cast<int>(r.integer("processes", 2, 1 << 24));
  for (int i = 0; i < kCommOpCount; ++i) {
    const auto op = static_cast<CommOp>(i);
    const nlohmann::json* one = r.find(to_string(op));
    if (!one) throw SpecError(r.child_path(to_string(op)), "missing required key");
    ObjectReader o(*one, r.child_path(to_string(op)));
    CommProfile c;
    c.alpha_s = units::us_to_s(o.number("alpha_us", 0, 1e9));
    c.bus_bandwidth = units::gbps_to_bytes_per_s(o.number("busbw_GBps", 1e-9, 1e9));
    c.rms_rel_error = o.number_or("rms_rel_error", 0, 0, 1e9);
    c.points = parse_size_points(o);
    c.cold_start_s = units::us_to_s(o.number_or("cold_start_us", 0, 0, 1e9));
    c.cold_start_back_to_back_s = units::us_to_s(o.number_or("back_to_back_us", 0, 0, 1e9));
    c.cold_start_after_compute_s = units::us_to_s(o.number_or("after_compute_us", 0, 0, 1e9));
    c.cold_start_bytes = o.number_or("cold_start_bytes", 0, 0, 1e15);
    o.finish();
    n.ops[op] = std::move(c);
  }
  r.finish();
  return n;
}

OverlapProfile parse_overlap(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  OverlapProfile o;
  o.comm_compute_slowdown = r.number("comm_compute_slowdown", 0, 1e3);
  o.compute_alone_s = units::us_to_s(r.number_or("compute_alone_us", 0, 0, 1e12));
  o.compute_with_comm_s = units::us_to_s(r.number_or("compute_with_comm_us", 0, 0, 1e12));
  o.comm_alone_s = units::us_to_s(r.number_or("comm_alone_us", 0, 0, 1e12));
  o.comm_with_compute_s = units::us_to_s(r.number_or("comm_with_compute_us", 0, 0, 1e12));
  o.comm_slowdown_during_compute = r.number_or("comm_slowdown_during_compute", 0, 0, 1e3);
  o.compute_contention = r.number_or("compute_contention", 0, 0, 1e3);
  o.compute_each_alone_s = units::us_to_s(r.number_or("compute_each_alone_us", 0, 0, 1e12));
  o.compute_each_together_s = units::us_to_s(r.number_or("compute_each_together_us", 0, 0, 1e12));
  if (const nlohmann::json* by = r.find("comm_slowdown_during_compute_by_op")) {
    ObjectReader b(*by, r.child_path("comm_slowdown_during_compute_by_op"));
    for (int i = 0; i < kCommOpCount; ++i) {
      const auto op = static_cast<CommOp>(i);
      if (b.has(to_string(op)))
        o.comm_slowdown_during_compute_by_op[op] = b.number(to_string(op), 0, 1e3);
    }
    b.finish();
  }
  r.finish();
  return o;
}

}  // namespace

EfficiencyCurve matmul_curve(const MatmulProfile& m) {
  EfficiencyCurve c{1.0, m.half_dim, {}};
  // Rates by smallest dimension, averaged where shapes share it.
  std::map<double, std::pair<double, int>> by_dim;
  for (const auto& p : m.points) {
    auto& [sum, count] = by_dim[std::min({p.m, p.n, p.k})];
    sum += p.flops_per_s;
    ++count;
  }
  if (by_dim.size() < 2 || !(m.peak > 0)) return c;
  for (const auto& [d, sc] : by_dim) {
    c.table.emplace_back(d, std::clamp(sc.first / sc.second / m.peak, 1e-6, 100.0));
  }
  return c;
}

HardwareProfile parse_profile(const nlohmann::json& doc, const std::string& source) {
  try {
    ObjectReader r(doc, "");
    check_document_format(r, kProfileFormat, kProfileVersion, "hardware profile");
    HardwareProfile p;
    p.source = source;
    p.name = r.string_or("name", "profile");
    if (const nlohmann::json* m = r.find("machine")) p.machine = parse_machine(*m, "machine");
    const nlohmann::json* device = r.find("device");
    if (!device) throw SpecError("device", "missing required key");
    p.device = parse_device(*device, "device");
    if (const nlohmann::json* n = r.find("network")) p.network = parse_network(*n, "network");
    if (const nlohmann::json* o = r.find("overlap")) p.overlap = parse_overlap(*o, "overlap");
    r.finish();
    return p;
  } catch (const SpecError& e) {
    if (source.empty()) throw;
    throw SpecError(source + ": " + e.path(), e.reason());
  }
}

HardwareProfile load_profile(const std::string& file) {
  return parse_profile(read_json_file(file), file);
}

nlohmann::json to_json(const HardwareProfile& p) {
  const auto& m = p.machine;
  nlohmann::json machine = {{"cpu_model", m.cpu_model},
                            {"nproc", m.nproc},
                            {"memory_GiB", m.memory_bytes / units::kGiB},
                            {"hostname", m.hostname},
                            {"device", m.device},
                            {"backend", m.backend},
                            {"processes", m.processes},
                            {"threads_per_process", m.threads_per_process},
                            {"date", m.date},
                            {"stratagem_version", m.stratagem_version},
                            {"torch_version", m.torch_version},
                            {"duration_s", m.duration_s},
                            {"quick", m.quick},
                            {"load_average", m.load_average}};
  nlohmann::json matmul = nlohmann::json::object();
  for (const auto& [t, mm] : p.device.matmul) matmul[to_string(t)] = matmul_json(mm);
  const auto& ew = p.device.elementwise;
  nlohmann::json device = {{"memory_GiB", p.device.memory_bytes / units::kGiB},
                           {"kernel_launch_us", p.device.kernel_launch_s / units::kMicro},
                           {"matmul", std::move(matmul)},
                           {"elementwise",
                            {{"GBps", ew.bandwidth / units::kGB},
                             {"launch_us", ew.launch_s / units::kMicro},
                             {"rms_rel_error", ew.rms_rel_error},
                             {"points", size_points_json(ew.points)}}}};
  if (!p.device.units.empty()) device["units"] = measured_units_json(p.device.units);
  nlohmann::json doc = {{"format", kProfileFormat},
                        {"version", kProfileVersion},
                        {"name", p.name},
                        {"machine", std::move(machine)},
                        {"device", std::move(device)}};
  if (p.network) {
    nlohmann::json n = {{"backend", p.network->backend}, {"processes", p.network->processes}};
    for (const auto& [op, c] : p.network->ops) {
      n[to_string(op)] = {{"alpha_us", c.alpha_s / units::kMicro},
                          {"busbw_GBps", c.bus_bandwidth / units::kGB},
                          {"rms_rel_error", c.rms_rel_error},
                          {"points", size_points_json(c.points)}};
      if (c.cold_start_bytes > 0) {
        auto& j = n[to_string(op)];
        j["cold_start_us"] = c.cold_start_s / units::kMicro;
        j["cold_start_bytes"] = c.cold_start_bytes;
        j["back_to_back_us"] = c.cold_start_back_to_back_s / units::kMicro;
        j["after_compute_us"] = c.cold_start_after_compute_s / units::kMicro;
      }
    }
    doc["network"] = std::move(n);
  }
  const auto& o = p.overlap;
  doc["overlap"] = {{"comm_compute_slowdown", o.comm_compute_slowdown},
                    {"compute_alone_us", o.compute_alone_s / units::kMicro},
                    {"compute_with_comm_us", o.compute_with_comm_s / units::kMicro},
                    {"comm_alone_us", o.comm_alone_s / units::kMicro},
                    {"comm_with_compute_us", o.comm_with_compute_s / units::kMicro},
                    {"comm_slowdown_during_compute", o.comm_slowdown_during_compute}};
  if (o.compute_each_alone_s > 0) {
    doc["overlap"]["compute_contention"] = o.compute_contention;
    doc["overlap"]["compute_each_alone_us"] = o.compute_each_alone_s / units::kMicro;
    doc["overlap"]["compute_each_together_us"] = o.compute_each_together_s / units::kMicro;
  }
  if (!o.comm_slowdown_during_compute_by_op.empty()) {
    auto& by = doc["overlap"]["comm_slowdown_during_compute_by_op"] = nlohmann::json::object();
    for (const auto& [op, v] : o.comm_slowdown_during_compute_by_op) by[to_string(op)] = v;
  }
  return doc;
}

void save_profile(const HardwareProfile& p, const std::string& file) {
  std::ofstream out(file);
  out << to_json(p).dump(2) << "\n";
  if (!out) throw RuntimeError("cannot write " + file);
}

GpuSpec profile_gpu(const HardwareProfile& p) {
  GpuSpec g;
  g.name = p.name;
  g.memory_bytes = p.device.memory_bytes;
  const MatmulProfile& fp32 = p.device.matmul.at(DType::fp32);
  g.matmul_efficiency = matmul_curve(fp32);
  auto set = [&](DType t, units::FlopsPerS& peak) {
    const auto it = p.device.matmul.find(t);
    const MatmulProfile& mm = it != p.device.matmul.end() ? it->second : fp32;
    peak = std::min(mm.peak, kMaxRate);
    g.matmul_efficiency_by_dtype[t] = matmul_curve(mm);
  };
  set(DType::fp32, g.peak_fp32);
  set(DType::tf32, g.peak_tf32);
  set(DType::fp16, g.peak_fp16);
  set(DType::bf16, g.peak_bf16);
  g.hbm_bandwidth = p.device.elementwise.bandwidth;
  g.kernel_launch_s = p.device.kernel_launch_s;
  g.measured_units = p.device.units;
  return g;
}

std::string unit_shape_key(const Scenario& s) {
  const auto& m = s.model;
  if (m.measured) {  // never matches a transformer's calibrated units
    return "measured " + m.name + " s" + std::to_string(s.training.seq_len) + " b" +
           std::to_string(s.strategy.micro_batch_size) + " " + to_string(s.strategy.precision);
  }
  const char* norm = m.norm == NormKind::layernorm ? "layernorm" : "rmsnorm";
  const char* mlp = m.mlp == MlpKind::gelu ? "gelu" : "swiglu";
  const char* pos = m.positions == PositionKind::learned ? "learned" : "rotary";
  return "h" + std::to_string(m.hidden) + " a" + std::to_string(m.heads) + " kv" +
         std::to_string(m.kv_heads) + " ffn" + std::to_string(m.ffn_hidden) + " v" +
         std::to_string(m.vocab) + " " + norm + " " + mlp + " " + pos +
         (m.bias ? " bias" : " nobias") + (m.tied_embeddings ? " tied" : " untied") + " s" +
         std::to_string(s.training.seq_len) + " b" + std::to_string(s.strategy.micro_batch_size) +
         " " + to_string(s.strategy.precision) +
         // One TP rank's shard of each unit, measured as its chain runs (unit_timing.hpp).
         (s.strategy.tp > 1
              ? " tp" + std::to_string(s.strategy.tp) + (s.strategy.sequence_parallel ? " sp" : "")
              : "");
}

std::optional<CommCalibration> profile_calibration(const HardwareProfile& p) {
  if (!p.network) return std::nullopt;
  CommCalibration c;
  c.profile = p.name;
  c.processes = p.network->processes;
  c.comm_compute_slowdown = p.overlap.comm_compute_slowdown;
  c.compute_comm_slowdown = p.overlap.comm_slowdown_during_compute;
  // Stratagem's Gloo communicator runs a rank's collectives in issue order on one thread.
  c.serial_collectives = p.network->backend == "gloo";
  c.compute_contention = p.overlap.compute_contention;
  for (const auto& [op, cp] : p.network->ops) {
    const auto& by = p.overlap.comm_slowdown_during_compute_by_op;
    const auto it = by.find(op);
    c.ops[static_cast<int>(op)] = {
        cp.alpha_s, cp.bus_bandwidth,
        it != by.end() ? it->second : p.overlap.comm_slowdown_during_compute, cp.cold_start_s};
  }
  return c;
}

void apply_profile(Scenario& s, const HardwareProfile& p) {
  auto& c = s.cluster;
  c.gpu = profile_gpu(p);
  c.name = "profile " + p.name;
  c.calibration = profile_calibration(p);
  if (c.calibration) {
    const MeasuredComm& p2p = c.calibration->at(CommOp::sendrecv);
    c.intra_node = {p2p.bus_bandwidth, p2p.alpha_s};
    if (c.nodes == 1) c.inter_node = c.intra_node;
  }
  validate(s);
}

}  // namespace stratagem::scenario
