#pragma once
// The one place for LibTorch calls whose spelling differs between LibTorch 1.13 (Debian 12)
// and 2.x (GPU machines): c10d::TCPStore construction, error text without C++ backtraces, the
// autograd gradient-accumulator hooks and autocast switches the Accelerator uses, and resizing
// a tensor's storage in place (FSDP's free and re-gather). Include it only from .cpp files.
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <ATen/Tensor.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace stratagem::runtime::compat {

/// A TCPStore server (listening on every local address, `port`) or a client of one at
/// host:port. Waits for no workers: the rendezvous counts arrivals itself to name the missing.
c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                                  std::chrono::milliseconds timeout);

/// e.what() for any exception; for c10::Error, the message without the C++ backtrace that
/// LibTorch 1.13 appends.
std::string error_text(const std::exception& e);

/// Runs `hook` each time autograd has accumulated a gradient into the leaf `param`'s .grad
/// (after AccumulateGrad, the hook DDP's Reducer uses; 2.1+ would call it
/// register_post_accumulate_grad_hook). Returns the accumulator node: keep it alive as long
/// as the hook must fire (a leaf holds it only weakly).
std::shared_ptr<void> add_post_accumulate_grad_hook(const at::Tensor& param,
                                                    std::function<void()> hook);

/// Turns autocast on for `device_type` (at::kCPU or at::kCUDA) in this thread with `dtype`, or
/// off when `dtype` is nullopt; clears the cast cache when turning it off.
void set_autocast(c10::DeviceType device_type, std::optional<at::ScalarType> dtype);

/// Whether CPU autocast to bf16 runs common models: LibTorch 1.13's CPU layer_norm rejects a
/// bf16 input with fp32 weights (2.x casts), so there the Accelerator emulates bf16 instead.
bool cpu_bf16_autocast_works();

/// Makes `t`'s storage `bytes` long, in place, keeping every view of it (FSDP frees gathered
/// parameters with size 0 and re-allocates before the next gather). The contents are lost.
void resize_storage(const at::Tensor& t, std::size_t bytes);

}  // namespace stratagem::runtime::compat
