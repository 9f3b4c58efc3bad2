#include "engine/measure/device_bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "engine/measure/stopwatch.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::measure {

namespace {

at::ScalarType storage_type(scenario::DType d) {
  switch (d) {
    case scenario::DType::fp16:
      return at::kHalf;
    case scenario::DType::bf16:
      return at::kBFloat16;
    case scenario::DType::fp32:
    case scenario::DType::tf32:
      return at::kFloat;
    case scenario::DType::fp8:
      break;  // LibTorch has no fp8 matmul to time here (scaled_mm is Hopper-only, 2.1+)
  }
  throw RuntimeError("device_bench: no fp8 GEMM to measure with this LibTorch");
}

// Restores the TF32 setting on scope exit.
class AllowTf32 {
 public:
  explicit AllowTf32(bool allow) : saved_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuBLAS(allow);
  }
  ~AllowTf32() { at::globalContext().setAllowTF32CuBLAS(saved_); }
  AllowTf32(const AllowTf32&) = delete;
  AllowTf32& operator=(const AllowTf32&) = delete;

 private:
  bool saved_;
};

}  // namespace

int cpu_threads_per_process(int local_processes) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(
      std::max(1u, cores / static_cast<unsigned>(std::max(1, local_processes))));
}

void synchronize(const at::Tensor& t) {
  if (t.defined() && !t.device().is_cpu() && t.numel() > 0) {
    (void)t.reshape(-1)[0].item<double>();  // a device-to-host copy waits for the stream
  }
}

double measure_rate(double work, const std::function<at::Tensor()>& f, double seconds, int trials) {
  synchronize(f());  // warm-up: allocations, kernel selection, caches
  double best = 0;
  for (int t = 0; t < std::max(trials, 1); ++t) {
    const auto t0 = Clock::now();
    std::int64_t calls = 0;
    at::Tensor last;
    do {
      last = f();
      ++calls;
    } while (seconds_since(t0) < seconds);
    synchronize(last);
    best = std::max(best, work * static_cast<double>(calls) / seconds_since(t0));
  }
  return best;
}

bool native_matmul_dtype(scenario::DType dtype, const c10::Device& device) {
  if (device.is_cpu()) return dtype == scenario::DType::fp32 || dtype == scenario::DType::bf16;
  return true;
}

double matmul_rate(scenario::DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                   const c10::Device& device, double seconds, int trials) {
  const auto type =
      device.is_cpu() && !native_matmul_dtype(dtype, device) ? at::kFloat : storage_type(dtype);
  const auto options = at::TensorOptions().device(device).dtype(type);
  const auto a = at::randn({m, k}, options);
  const auto b = at::randn({k, n}, options);
  auto c = at::empty({m, n}, options);
  AllowTf32 tf32(dtype == scenario::DType::tf32);
  const double flop =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return measure_rate(
      flop,
      [&] {
        at::mm_out(c, a, b);
        return c;
      },
      seconds, trials);
}

double elementwise_seconds(std::int64_t elements, const c10::Device& device, double seconds) {
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  const auto a = at::rand({elements}, options);
  const auto b = at::rand({elements}, options);
  auto c = at::empty({elements}, options);
  const double calls_per_s = measure_rate(
      1.0,
      [&] {
        at::add_out(c, a, b);
        return c;
      },
      seconds, 1);
  return 1.0 / calls_per_s;
}

scenario::GpuSpec measure_cpu_device(int processes_on_node) {
  // The best of a few short trials, so that a moment of interference from other processes
  // (the other workers start at the same time) does not set the peak.
  constexpr double kTrialSeconds = 0.02;
  constexpr int kTrials = 5;
  constexpr std::int64_t kMatmulDim = 256;
  constexpr std::int64_t kCopyBytes = 32LL << 20;
  scenario::GpuSpec g;
  const int threads = at::get_num_threads();
  g.name = "cpu (measured, " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "") +
           " per process)";
  const double pages = static_cast<double>(::sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  g.memory_bytes = pages * page / processes_on_node;
  const c10::Device cpu(c10::kCPU);
  g.peak_fp32 = matmul_rate(scenario::DType::fp32, kMatmulDim, kMatmulDim, kMatmulDim, cpu,
                            kTrialSeconds, kTrials);
  g.peak_tf32 = g.peak_fp32;  // no tf32 on CPUs
  g.peak_bf16 = matmul_rate(scenario::DType::bf16, kMatmulDim, kMatmulDim, kMatmulDim, cpu,
                            kTrialSeconds, kTrials);
  // fp16 runs in fp32 on a CPU (model_units.hpp), so its attainable rate is fp32's.
  g.peak_fp16 = g.peak_fp32;
  auto src = at::empty({kCopyBytes / 4}), dst = at::empty({kCopyBytes / 4});
  g.hbm_bandwidth = measure_rate(
      2.0 * static_cast<double>(kCopyBytes),
      [&] {
        dst.copy_(src);
        return dst;
      },
      kTrialSeconds, kTrials);
  return g;
}

#ifndef STRATAGEM_HAVE_NCCL
std::optional<CudaDeviceInfo> cuda_device_info(int) {
  return std::nullopt;
}
#endif

}  // namespace stratagem::measure
