#include "engine/measure/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include "engine/measure/cold_start.hpp"
#include "engine/measure/commbench.hpp"
#include "engine/measure/compute_contention.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/measure/stopwatch.hpp"
#include "engine/measure/unit_timing.hpp"
#include "engine/result/metrics.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fit.hpp"
#include "engine/scenario/host.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::measure {

namespace {

// How much to measure. The default finishes in about 15 s on a 2-core machine with 2
// processes; --quick in a few seconds (for tests), with correspondingly noisier fits.
struct Sweep {
  std::vector<std::int64_t> matmul_dims;
  double matmul_s = 0;
  std::vector<std::int64_t> elementwise_elements;
  double elementwise_s = 0;
  std::vector<std::int64_t> comm_bytes;
  double comm_budget_s = 0;  // timed loops per size, all repeats together
  int repeats = 1;           // timed loops per size (the median counts)
  int comm_max_iters = 0;
  double overlap_s = 0;
  std::int64_t overlap_dim = 0;
  std::int64_t overlap_bytes = 0;
};

Sweep sweep_for(bool quick) {
  Sweep s;
  if (quick) {
    s.matmul_dims = {32, 128, 256};
    s.matmul_s = 0.02;
    s.elementwise_elements = {256, 16384, 1 << 20};
    s.elementwise_s = 0.01;
    s.comm_bytes = {4096, 65536, 1 << 20};
    s.comm_budget_s = 0.01;
    s.comm_max_iters = 20;
    s.overlap_s = 0.05;
    s.overlap_dim = 128;
    s.overlap_bytes = 1 << 20;
  } else {
    s.matmul_dims = {16, 32, 64, 128, 256, 512, 1024};
    s.matmul_s = 0.15;
    s.elementwise_elements = {64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
    s.elementwise_s = 0.05;
    s.comm_bytes = {1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
    s.comm_budget_s = 0.15;
    s.repeats = 3;
    s.comm_max_iters = 200;
    s.overlap_s = 0.5;
    s.overlap_dim = 256;
    s.overlap_bytes = 4 << 20;
  }
  return s;
}

class Calibration {
 public:
  Calibration(comm::Communicator& comm, const CalibrateOptions& o,
              const std::function<void(const std::string&)>& log)
      : comm_(comm), o_(o), log_(log), sweep_(sweep_for(o.quick)), n_(comm.world_size()) {}

  scenario::HardwareProfile run() {
    const auto t0 = Clock::now();
    scenario::HardwareProfile p;
    p.machine = machine();
    p.name = o_.name.empty() ? default_name(p.machine) : o_.name;
    p.device = device();
    for (const auto& s : o_.unit_scenarios) {
      const std::string key = scenario::unit_shape_key(s);
      const auto& have = p.device.units;
      if (std::any_of(have.begin(), have.end(), [&](const auto& u) { return u.shape == key; })) {
        continue;
      }
      p.device.units.push_back(units_of(s));
    }
    if (n_ >= 2) {
      p.network = network();
      p.overlap = overlap(*p.network);
      if (o_.device.is_cpu()) contention(p.overlap);
    } else {
      say("network: one process, nothing to measure (run with --num_processes >= 2)");
    }
    p.machine.duration_s = reduce_scalar(comm_, seconds_since(t0), comm::ReduceOp::max, o_.device);
    return p;
  }

 private:
  void say(const std::string& line) const {
    if (log_) log_(line);
  }
  double mean(double v) { return reduce_scalar(comm_, v, comm::ReduceOp::sum, o_.device) / n_; }

  // The scenario's units timed on every rank at once (the mean over ranks).
  scenario::MeasuredUnits units_of(const scenario::Scenario& s) {
    scenario::MeasuredUnits m = measure_units_on_all_ranks(s, comm_, o_.device, o_.quick ? 2 : 12);
    say("units " + m.shape + ": block forward " + std::to_string(m.block_forward * 1e3) +
        " ms, backward " + std::to_string(m.block_backward * 1e3) + " ms; head " +
        std::to_string(m.head_forward * 1e3) + " / " + std::to_string(m.head_backward * 1e3) +
        " ms; optimizer " + std::to_string(m.optimizer_per_param * 1e9) + " ns/param; spread " +
        std::to_string(100 * m.jitter_cv) + " % per repetition, " +
        std::to_string(100 * m.rank_cv) + " % between ranks");
    return m;
  }
  double max(double v) { return reduce_scalar(comm_, v, comm::ReduceOp::max, o_.device); }

  static std::string default_name(const scenario::ProfileMachine& m) {
    return m.device + " x" + std::to_string(m.processes) + " (" + m.backend + ")";
  }

  scenario::ProfileMachine machine() const {
    scenario::ProfileMachine m;
    m.cpu_model = scenario::cpu_model();
    m.nproc = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m.memory_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<double>(::sysconf(_SC_PAGESIZE));
    m.hostname = scenario::hostname();
    m.device = "cpu";
    if (!o_.device.is_cpu()) {
      const auto info = cuda_device_info(o_.device.index());
      m.device = info ? info->name : "cuda";
    }
    m.backend = comm_.backend();
    m.processes = n_;
    m.threads_per_process = o_.device.is_cpu() ? at::get_num_threads() : 1;
    m.date = scenario::utc_now();
    m.stratagem_version = o_.stratagem_version;
    m.torch_version = TORCH_VERSION;
    m.quick = o_.quick;
    m.load_average = scenario::load_average();
    return m;
  }

  std::vector<scenario::DType> dtypes() const {
    if (o_.device.is_cpu()) return {scenario::DType::fp32, scenario::DType::bf16};
    return {scenario::DType::fp32, scenario::DType::tf32, scenario::DType::fp16,
            scenario::DType::bf16};
  }

  scenario::DeviceProfile device() {
    scenario::DeviceProfile d;
    if (o_.device.is_cpu()) {
      d.memory_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                       std::max(1, o_.local_processes);
    } else {
      const auto info = cuda_device_info(o_.device.index());
      d.memory_bytes = info ? info->memory_bytes : 0;
    }
    std::vector<GemmShape> shapes;
    for (auto dim : sweep_.matmul_dims) shapes.push_back({dim, dim, dim});
    for (const auto& g : o_.extra_gemms) shapes.push_back(g);
    for (scenario::DType t : dtypes()) {
      scenario::MatmulProfile mm;
      std::vector<double> dims, rates;
      for (const auto& g : shapes) {
        comm_.barrier({});
        const double rate = mean(matmul_rate(t, g.m, g.n, g.k, o_.device, sweep_.matmul_s, 1));
        mm.points.push_back(
            {static_cast<double>(g.m), static_cast<double>(g.n), static_cast<double>(g.k), rate});
        dims.push_back(static_cast<double>(std::min({g.m, g.n, g.k})));
        rates.push_back(rate);
      }
      const auto fit = scenario::fit_efficiency(dims, rates);
      mm.peak = fit.peak;
      mm.half_dim = fit.half_dim;
      mm.rms_rel_error = fit.rms_rel_error;
      std::ostringstream line;
      line << "matmul " << scenario::to_string(t) << ": peak " << fit.peak / units::kGiga
           << " GFLOP/s per process, half_dim " << fit.half_dim << " (fit error "
           << 100 * fit.rms_rel_error << " %)";
      say(line.str());
      d.matmul[t] = std::move(mm);
    }
    std::vector<double> bytes, seconds;
    for (auto elements : sweep_.elementwise_elements) {
      comm_.barrier({});
      const double s = mean(elementwise_seconds(elements, o_.device, sweep_.elementwise_s));
      const double b = 3.0 * 4.0 * static_cast<double>(elements);  // read a, b; write c (fp32)
      bytes.push_back(b);
      seconds.push_back(s);
      d.elementwise.points.push_back({b, s});
    }
    const auto line = scenario::fit_line_relative(bytes, seconds);
    d.elementwise.launch_s = line.intercept;
    d.elementwise.bandwidth = line.slope > 0 ? 1.0 / line.slope : bytes.back() / seconds.back();
    d.elementwise.rms_rel_error = line.rms_rel_error;
    d.kernel_launch_s = line.intercept;
    std::ostringstream text;
    text << "elementwise: " << d.elementwise.bandwidth / units::kGB << " GB/s, launch "
         << d.kernel_launch_s / units::kMicro << " us (fit error " << 100 * line.rms_rel_error
         << " %)";
    say(text.str());
    return d;
  }

  scenario::CommProfile fit_comm(scenario::CommOp op,
                                 const std::vector<scenario::SizePoint>& points) const {
    std::vector<double> x, y;
    for (const auto& p : points) {
      x.push_back(p.bytes);
      y.push_back(p.seconds);
    }
    const auto line = scenario::fit_line_relative(x, y);
    scenario::CommProfile c;
    c.alpha_s = line.intercept;
    // The largest message's bus bandwidth when the fit sees no size dependence at all.
    c.bus_bandwidth = line.slope > 0 ? scenario::bus_factor(op, n_) / line.slope
                                     : scenario::bus_factor(op, n_) * x.back() / y.back();
    c.rms_rel_error = line.rms_rel_error;
    c.points = points;
    return c;
  }

  void say_comm(scenario::CommOp op, const scenario::CommProfile& c) const {
    std::ostringstream line;
    line << scenario::to_string(op) << ": alpha " << c.alpha_s / units::kMicro << " us, busbw "
         << c.bus_bandwidth / units::kGB << " GB/s (fit error " << 100 * c.rms_rel_error << " %)";
    say(line.str());
  }

  // Each size's time is the median of `repeats` timed loops (each a third of the budget), so
  // that a moment of interference from other processes on a shared machine does not set it
  // (result::median).

  scenario::NetworkProfile network() {
    scenario::NetworkProfile net;
    net.backend = comm_.backend();
    net.processes = n_;
    for (scenario::CommOp op : scenario::kCollectiveOps) {
      CommBenchOptions b;
      b.op = op;
      b.dtype = at::kFloat;
      b.device = o_.device;
      b.sizes = sweep_.comm_bytes;
      b.warmup = 1;
      b.iters = sweep_.comm_max_iters;
      b.budget_s = sweep_.comm_budget_s / sweep_.repeats;
      b.check = true;
      std::vector<std::vector<double>> times(b.sizes.size());
      for (int rep = 0; rep < sweep_.repeats; ++rep) {
        b.check = rep == 0;  // once is enough to know the op is right
        const auto rows = run_commbench(comm_, b);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          if (rows[i].wrong > 0) {
            throw RuntimeError(std::string("calibrate: ") + scenario::to_string(op) + " of " +
                               std::to_string(rows[i].bytes) + " B gave " +
                               std::to_string(rows[i].wrong) + " wrong elements");
          }
          times[i].push_back(rows[i].time_s);
        }
      }
      std::vector<scenario::SizePoint> points;
      for (std::size_t i = 0; i < b.sizes.size(); ++i) {
        points.push_back({static_cast<double>(b.sizes[i]), result::median(times[i])});
      }
      net.ops[op] = fit_comm(op, points);
      say_comm(op, net.ops[op]);
    }
    ColdStartOptions cold;
    // Quick, still enough calls for a mean of a heavy-tailed time: with 8 calls the extra
    // moved between 0 and 1.7 ms from one calibration to the next on the 2-vCPU VM.
    if (o_.quick) cold.samples = 30;
    for (scenario::CommOp op : scenario::kCollectiveOps) {
      const ColdStart c = measure_cold_start(comm_, op, o_.device, cold);
      auto& p = net.ops[op];
      p.cold_start_s = c.extra_s();
      p.cold_start_back_to_back_s = c.back_to_back_s;
      p.cold_start_after_compute_s = c.after_compute_s;
      p.cold_start_bytes = static_cast<double>(cold.bytes);
      std::ostringstream line;
      line << scenario::to_string(op) << " after compute: +" << c.extra_s() / units::kMicro
           << " us (" << c.after_compute_s / units::kMicro << " us against "
           << c.back_to_back_s / units::kMicro << " us back to back, " << cold.bytes / 1024
           << " KiB)";
      say(line.str());
    }
    net.ops[scenario::CommOp::sendrecv] = fit_comm(scenario::CommOp::sendrecv, ping_pong());
    say_comm(scenario::CommOp::sendrecv, net.ops[scenario::CommOp::sendrecv]);
    return net;
  }

  // Ranks 2i and 2i+1 bounce one message back and forth; one way is half a round trip.
  std::vector<scenario::SizePoint> ping_pong() {
    const int rank = comm_.rank();
    const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    const bool active = peer < n_;
    std::vector<scenario::SizePoint> points;
    std::uint32_t tag = 1u << 24;
    for (auto bytes : sweep_.comm_bytes) {
      const auto t = at::ones({std::max<std::int64_t>(bytes / 4, 1)},
                              at::TensorOptions().dtype(at::kFloat).device(o_.device));
      auto round_trip = [&] {
        if (!active) return;
        if (rank % 2 == 0) {
          comm_.send(t, peer, tag)->wait();
          comm_.recv(t, peer, tag + 1)->wait();
        } else {
          comm_.recv(t, peer, tag)->wait();
          comm_.send(t, peer, tag + 1)->wait();
        }
        tag += 2;
      };
      comm_.barrier({});
      auto t0 = Clock::now();
      round_trip();
      const double estimate = max(seconds_since(t0));
      const int iters = static_cast<int>(std::clamp<double>(
          std::ceil(sweep_.comm_budget_s / sweep_.repeats / std::max(estimate, 1e-9)), 2,
          sweep_.comm_max_iters));
      std::vector<double> trials;
      for (int rep = 0; rep < sweep_.repeats; ++rep) {
        comm_.barrier({});
        t0 = Clock::now();
        for (int i = 0; i < iters; ++i) round_trip();
        trials.push_back(max(active ? seconds_since(t0) / (2.0 * iters) : 0.0));
      }
      points.push_back({static_cast<double>(bytes), result::median(trials)});
    }
    return points;
  }

  // CPU processes share the host: the first --scenario's block forward and backward (else a
  // block-like MLP) alone on each rank in turn, then on all at once. (GPUs: one device each.)
  void contention(scenario::OverlapProfile& ov) {
    const auto work = o_.unit_scenarios.empty()
                          ? mlp_workload(o_.device)
                          : block_workload(o_.unit_scenarios.front(), o_.device);
    const ComputeContention c =
        measure_compute_contention(comm_, work, o_.quick ? 0.05 : 0.3, o_.device);
    ov.compute_each_alone_s = c.alone_s;
    ov.compute_each_together_s = c.together_s;
    ov.compute_contention = c.per_peer;
    std::ostringstream line;
    line << "compute contention: " << c.together_s * 1e3 << " ms with " << n_
         << " processes computing against " << c.alone_s * 1e3 << " ms alone: +"
         << 100 * c.per_peer << " % per other computing process";
    say(line.str());
  }

  scenario::OverlapProfile overlap(const scenario::NetworkProfile& net) {
    scenario::OverlapProfile ov;
    const auto options = at::TensorOptions().dtype(at::kFloat).device(o_.device);
    const std::int64_t dim = sweep_.overlap_dim;
    const auto a = at::randn({dim, dim}, options), b = at::randn({dim, dim}, options);
    auto c = at::empty({dim, dim}, options);
    const double flop = 2.0 * static_cast<double>(dim * dim * dim);
    auto mm = [&] {
      at::mm_out(c, a, b);
      return c;
    };
    auto buffer = at::ones({sweep_.overlap_bytes / 4}, options);
    const auto& ar = net.ops.at(scenario::CommOp::all_reduce);
    const double predicted = ar.alpha_s + scenario::bus_factor(scenario::CommOp::all_reduce, n_) *
                                              static_cast<double>(sweep_.overlap_bytes) /
                                              ar.bus_bandwidth;
    const int ops = static_cast<int>(
        std::clamp<double>(std::ceil(sweep_.overlap_s / std::max(predicted, 1e-6)), 4, 10000));

    // Compute alone (every process computing, as in a training step).
    comm_.barrier({});
    const double rate_alone = measure_rate(flop, mm, sweep_.overlap_s, 1);
    // Communication alone, then while every process computes, per collective: the
    // reductions of Gloo run on the CPU and compete with compute more than copies do.
    const std::int64_t elems = sweep_.overlap_bytes / 4 / n_ * n_;
    auto issue = [&](scenario::CommOp op) -> comm::WorkPtr {
      const auto whole = buffer.narrow(0, 0, elems), part = buffer.narrow(0, 0, elems / n_);
      switch (op) {
        case scenario::CommOp::reduce_scatter:
          return comm_.reduce_scatter(part.clone(), whole, {});
        case scenario::CommOp::all_gather:
          return comm_.all_gather(whole.clone(), part, {});
        default:
          return comm_.all_reduce(buffer, {}, comm::ReduceOp::sum);
      }
    };
    // The competing compute: a transformer block of the first --scenario when there is one
    // (what a training step runs while its gradients sync), else the matmul loop.
    std::function<void()> block;
    if (!o_.unit_scenarios.empty()) block = block_workload(o_.unit_scenarios.front(), o_.device);
    auto comm_time = [&](scenario::CommOp op, bool with_compute, double* compute_rate) {
      comm_.barrier({});
      if (with_compute) synchronize(mm());
      const auto start = Clock::now();
      std::vector<comm::WorkPtr> works;
      for (int i = 0; i < ops; ++i) works.push_back(issue(op));
      std::int64_t calls = 0;
      at::Tensor last;
      while (with_compute && !works.back()->is_completed()) {
        if (block && !compute_rate) {
          block();
        } else {
          last = mm();
        }
        ++calls;
      }
      for (auto& w : works) w->wait();
      const double elapsed = seconds_since(start);
      if (with_compute && last.defined()) synchronize(last);
      if (compute_rate) {
        *compute_rate = calls > 0 ? flop * static_cast<double>(calls) / seconds_since(start) : 0;
      }
      return elapsed / ops;
    };
    double rate_with = 0;
    const double comm_alone = comm_time(scenario::CommOp::all_reduce, false, nullptr);
    const double comm_elapsed = comm_time(scenario::CommOp::all_reduce, true, &rate_with) * ops;
    for (scenario::CommOp op : {scenario::CommOp::all_reduce, scenario::CommOp::reduce_scatter,
                                scenario::CommOp::all_gather}) {
      const double alone = max(comm_time(op, false, nullptr));
      const double with = max(comm_time(op, true, nullptr));
      ov.comm_slowdown_during_compute_by_op[op] = std::max(0.0, with / std::max(alone, 1e-12) - 1);
    }

    ov.compute_alone_s = mean(flop / rate_alone);
    ov.compute_with_comm_s = rate_with > 0 ? mean(flop / rate_with) : 0;
    ov.comm_alone_s = max(comm_alone);
    ov.comm_with_compute_s = max(comm_elapsed / ops);
    ov.comm_compute_slowdown = ov.compute_with_comm_s > 0
                                   ? std::max(0.0, ov.compute_with_comm_s / ov.compute_alone_s - 1)
                                   : 0.0;
    ov.comm_slowdown_during_compute =
        std::max(0.0, ov.comm_with_compute_s / std::max(ov.comm_alone_s, 1e-12) - 1);
    std::ostringstream line;
    line << "overlap: compute +" << 100 * ov.comm_compute_slowdown
         << " % time during communication, communication +" << 100 * ov.comm_slowdown_during_compute
         << " % time during compute (reduce_scatter +"
         << 100 * ov.comm_slowdown_during_compute_by_op[scenario::CommOp::reduce_scatter]
         << " %, all_gather +"
         << 100 * ov.comm_slowdown_during_compute_by_op[scenario::CommOp::all_gather] << " %)";
    say(line.str());
    return ov;
  }

  comm::Communicator& comm_;
  const CalibrateOptions& o_;
  std::function<void(const std::string&)> log_;
  Sweep sweep_;
  int n_;
};

}  // namespace

std::vector<GemmShape> model_gemms(const scenario::Scenario& s) {
  const auto& m = s.model;
  const std::int64_t tokens = std::int64_t{s.strategy.micro_batch_size} * s.training.seq_len;
  const std::int64_t h = m.hidden;
  const std::int64_t head_dim = m.heads > 0 ? h / m.heads : h;
  const std::int64_t kv = (m.kv_heads > 0 ? m.kv_heads : m.heads) * head_dim;
  const std::int64_t ffn = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * h;
  std::vector<GemmShape> out = {
      {tokens, h + 2 * kv, h}, {tokens, h, h}, {tokens, ffn, h}, {tokens, h, ffn}};
  // Distinct shapes only (SwiGLU's gate repeats the h × ffn one).
  std::sort(out.begin(), out.end(), [](const GemmShape& a, const GemmShape& b) {
    return std::tie(a.m, a.n, a.k) < std::tie(b.m, b.n, b.k);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const GemmShape& a, const GemmShape& b) {
                          return a.m == b.m && a.n == b.n && a.k == b.k;
                        }),
            out.end());
  return out;
}

scenario::HardwareProfile calibrate(comm::Communicator& comm, const CalibrateOptions& options,
                                    const std::function<void(const std::string&)>& log) {
  return Calibration(comm, options, log).run();
}

}  // namespace stratagem::measure
