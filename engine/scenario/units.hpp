#pragma once
// Unit conventions, stated once. Internally: bytes, seconds, FLOP and FLOP/s, bytes/s.
// Scenario files use the suffixed units their keys name (_GBps, _us, _GiB, _tflops).
#include <cstdint>

namespace stratagem::units {

using Bytes = double;      ///< bytes (double: model sizes exceed 2^53 only past 9 PB)
using Seconds = double;    ///< seconds
using Flops = double;      ///< floating-point operations
using FlopsPerS = double;  ///< FLOP/s
using BytesPerS = double;  ///< bytes/s

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;  ///< decimal gigabyte, used for link bandwidths (GB/s)
inline constexpr double kMB = 1e6;  ///< decimal megabyte
inline constexpr double kTera = 1e12;
inline constexpr double kGiga = 1e9;
inline constexpr double kMicro = 1e-6;

constexpr BytesPerS gbps_to_bytes_per_s(double gbps) {
  return gbps * kGB;
}
constexpr Seconds us_to_s(double us) {
  return us * kMicro;
}
constexpr FlopsPerS tflops_to_flops(double tflops) {
  return tflops * kTera;
}
constexpr Bytes gib_to_bytes(double gib) {
  return gib * kGiB;
}
/// PyTorch DDP's bucket_cap_mb is in MiB (mebibytes): 25 MB means 25 * 2^20 bytes.
constexpr Bytes bucket_mb_to_bytes(double mb) {
  return mb * kMiB;
}

}  // namespace stratagem::units
