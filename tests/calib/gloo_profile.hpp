#pragma once
// A small two-process Gloo profile for the calibration tests: a device with one fp32 matmul
// curve and an element-wise rate, and every collective at α 100 µs, 1 GB/s.
#include <string>

#include "engine/scenario/profile.hpp"

namespace stratagem::test {

inline scenario::HardwareProfile gloo_profile(const std::string& name) {
  scenario::HardwareProfile p;
  p.name = name;
  p.device.memory_bytes = 1e9;
  p.device.matmul[scenario::DType::fp32] = {50e9, 100, 0, {}};
  p.device.elementwise = {10e9, 1e-6, 0, {}};
  scenario::NetworkProfile n;
  n.backend = "gloo";
  for (int i = 0; i < scenario::kCommOpCount; ++i)
    n.ops[static_cast<scenario::CommOp>(i)] = {1e-4, 1e9, 0, {}};
  p.network = n;
  return p;
}

}  // namespace stratagem::test
