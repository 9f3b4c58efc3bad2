#pragma once
// GPUs, links and clusters. Numbers in SI units (bytes, bytes/s, FLOP/s, seconds).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/spec/units.hpp"

namespace stratagem::spec {

enum class DType { fp32, tf32, fp16, bf16 };
const char* to_string(DType d);
/// Bytes per element of a storage dtype (tf32 is stored as fp32).
double dtype_bytes(DType d);

/// How far a matrix multiply gets from the peak: efficiency(d) = max · d / (d + half_dim),
/// where d is the smallest of the GEMM's m, n, k. Small GEMMs are launch- and tile-bound.
struct EfficiencyCurve {
  double max = 0.8;
  double half_dim = 128;
  double at(double smallest_dim) const { return max * smallest_dim / (smallest_dim + half_dim); }
};

struct GpuSpec {
  std::string name;
  units::Bytes memory_bytes = 0;
  units::FlopsPerS peak_fp32 = 0;
  units::FlopsPerS peak_tf32 = 0;
  units::FlopsPerS peak_fp16 = 0;
  units::FlopsPerS peak_bf16 = 0;
  units::BytesPerS hbm_bandwidth = 0;
  EfficiencyCurve matmul_efficiency;
  units::Seconds kernel_launch_s = 5e-6;
  units::FlopsPerS peak(DType d) const;
};

struct LinkSpec {
  units::BytesPerS bandwidth = 0;  ///< per GPU, per direction
  units::Seconds latency = 0;
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  LinkSpec intra_node;
  LinkSpec inter_node;
  int world_size() const { return nodes * gpus_per_node; }
};

/// Parses a GPU object (merged with its preset).
GpuSpec parse_gpu(const nlohmann::json& object, const std::string& path);
/// Parses a cluster object (merged with its preset); `gpu` may be a preset name or object.
ClusterSpec parse_cluster(const nlohmann::json& object, const std::string& path);

nlohmann::json to_json(const GpuSpec& gpu);
nlohmann::json to_json(const ClusterSpec& cluster);

}  // namespace stratagem::spec
