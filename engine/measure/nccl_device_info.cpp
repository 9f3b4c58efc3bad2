// cuda_device_info (device_bench.hpp) where CUDA is available: compiled with the NCCL backend,
// which links the CUDA runtime.
#include <cuda_runtime_api.h>

#include "engine/measure/device_bench.hpp"

namespace stratagem::measure {

std::optional<CudaDeviceInfo> cuda_device_info(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return std::nullopt;
  return CudaDeviceInfo{prop.name, static_cast<double>(prop.totalGlobalMem)};
}

}  // namespace stratagem::measure
