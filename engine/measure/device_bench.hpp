#pragma once
// Measuring a device's compute: sustained GEMM and element-wise rates on CPU or CUDA tensors,
// used by `stratagem calibrate` (calibrate.hpp) and by real runs that describe their CPU
// "devices" (worker_main.hpp). Timing is host wall-clock around work that is made to finish
// (a CUDA result is read back), so no CUDA headers are needed.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include "engine/scenario/cluster.hpp"

namespace stratagem::measure {

/// Intra-op threads for each of `local_processes` CPU worker processes: the node's cores
/// shared evenly, at least one (what `stratagem worker` and `calibrate` set).
int cpu_threads_per_process(int local_processes);

/// Waits until the work queued on `t`'s device before now has finished (no-op on the CPU).
void synchronize(const at::Tensor& t);

/// Calls `f` once to warm up, then repeatedly for `seconds` of wall time, and returns
/// work · calls / elapsed; `f` returns a tensor it produced, synchronised at the end. With
/// `trials` > 1 the best trial counts, which ignores a moment of interference but, when
/// processes share cores, overstates what each gets; pass 1 to measure sharing.
double measure_rate(double work, const std::function<at::Tensor()>& f, double seconds,
                    int trials = 1);

/// FLOP/s of an m×k by k×n matrix multiply (2·m·n·k FLOP) in `dtype` on `device`.
/// tf32 is fp32 with TF32 tensor-core math allowed (CUDA only; the same as fp32 on CPUs).
double matmul_rate(scenario::DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                   const c10::Device& device, double seconds, int trials = 1);

/// Seconds per element-wise fp32 add c = a + b of `elements` elements (3·4·elements bytes
/// moved), the kind of memory-bound kernel norms, activations and optimizer updates are.
double elementwise_seconds(std::int64_t elements, const c10::Device& device, double seconds);

/// Whether dtype runs natively on `device`, or (false) is computed in another dtype by the
/// runtime (fp16 and tf32 on CPUs compute in fp32; see model_units.hpp).
bool native_matmul_dtype(scenario::DType dtype, const c10::Device& device);

/// A CPU "device": this process's share of the machine (fp32/bf16 matmul at 256³, copy
/// bandwidth; best of 5 short trials), as real runs on CPUs describe their devices.
scenario::GpuSpec measure_cpu_device(int processes_on_node);

struct CudaDeviceInfo {
  std::string name;
  double memory_bytes = 0;
};
/// The CUDA device's name and memory (nullopt in builds without CUDA/NCCL).
std::optional<CudaDeviceInfo> cuda_device_info(int index);

}  // namespace stratagem::measure
