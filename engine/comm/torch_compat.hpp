#pragma once
// The one place for LibTorch calls whose spelling differs between LibTorch 1.13 (Debian 12)
// and 2.x (GPU machines): c10d::TCPStore construction, error text without C++ backtraces, the
// autograd gradient-accumulator hooks and autocast switches the Accelerator uses, and resizing
// a tensor's storage in place (FSDP's free and re-gather), and the op profiler and autograd
// graph reading that measure a user's model. Include it only from .cpp files.
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/Tensor.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace stratagem::comm::compat {

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
/// LibTorch's own log messages below ERROR (profiler and allocator warnings) off when
/// `quiet`, back on otherwise: c10's level and, in builds logging through glog (Debian's),
/// glog's.
void set_library_log_level(bool quiet);

/// Makes `t`'s storage `bytes` long, in place, keeping every view of it (FSDP frees gathered
/// parameters with size 0 and re-allocates before the next gather). The contents are lost.
void resize_storage(const at::Tensor& t, std::size_t bytes);

/// What the op profiler recorded on this thread, in order: an op's start (with the FLOPs
/// LibTorch counts for matrix multiplies, convolutions and element-wise add/mul, and the
/// autograd sequence number it peeked), its end, or an allocation (+bytes) / free (−bytes).
struct ProfiledEvent {
  enum class Kind { op_start, op_end, memory };
  Kind kind = Kind::op_start;
  std::string name;
  std::int64_t sequence_nr = -1;  ///< -1: not an autograd-recorded op
  double flops = 0;
  std::int64_t bytes = 0;
};

/// Starts LibTorch's (legacy, thread-local) op profiler with FLOPs and memory on this thread.
/// Throws if a profiler is already on.
void start_op_profiler();
/// Stops it and returns this thread's events (empty when it was not on).
std::vector<ProfiledEvent> stop_op_profiler();

/// One node of the autograd graph behind a forward output.
struct GraphNode {
  std::uint64_t sequence_nr = 0;  ///< the forward op's order (as ProfiledEvent::sequence_nr)
  std::int64_t output_bytes = 0;  ///< bytes of the forward op's first output
  std::vector<int> params;        ///< indices into `params` of the leaves it reads directly
};
/// Every node reachable from `output`'s grad_fn except the leaves' accumulators; output_bytes
/// only for the sequence numbers in `bytes_for` (reading a shape allocates a tensor of it
/// once: 1.13 keeps InputMetadata's shape private), 0 for the others.
std::vector<GraphNode> autograd_graph(const at::Tensor& output,
                                      const std::vector<at::Tensor>& params,
                                      const std::unordered_set<std::uint64_t>& bytes_for = {});

}  // namespace stratagem::comm::compat
