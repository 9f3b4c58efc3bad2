#pragma once
// Autocast for the runtime's units (model_units.cpp, tp_units.cpp).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>

namespace stratagem::runtime {

// Enables autocast to `dtype` for the device's type while alive, and drops the cast cache
// on exit (weights change between steps).
class AutocastScope {
 public:
  AutocastScope(bool on, at::ScalarType dtype, const c10::Device& device)
      : on_(on), cuda_(device.is_cuda()) {
    if (!on_) return;
    if (cuda_) {
      prev_enabled_ = at::autocast::is_enabled();
      prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(true);
    } else {
      prev_enabled_ = at::autocast::is_cpu_enabled();
      prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(true);
    }
  }
  ~AutocastScope() {
    if (!on_) return;
    if (cuda_) {
      at::autocast::set_enabled(prev_enabled_);
      at::autocast::set_autocast_gpu_dtype(prev_dtype_);
    } else {
      at::autocast::set_cpu_enabled(prev_enabled_);
      at::autocast::set_autocast_cpu_dtype(prev_dtype_);
    }
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_;
  bool cuda_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace stratagem::runtime
