#include "engine/runtime/torch_compat.hpp"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>

namespace stratagem::runtime::compat {

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                                  std::chrono::milliseconds timeout) {
  // Assigned field by field: 2.x adds fields (masterListenFd, useLibUV) and reorders none of
  // these, so designated initialisers would not compile on both.
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = is_server;
  opts.numWorkers = c10::nullopt;
  opts.waitWorkers = false;
  // LibTorch 1.13 counts the connect timeout in whole seconds (truncating 500 ms to 0 and
  // failing at once); round up. Our waits pass their own timeouts.
  opts.timeout = std::chrono::ceil<std::chrono::seconds>(timeout);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // 2.4 made the libuv server the default; both serve the same protocol. Keep the classic
  // one, which is what 1.13 runs and what our tests exercise.
  opts.useLibUV = false;
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
}

std::string error_text(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

std::shared_ptr<void> add_post_accumulate_grad_hook(const at::Tensor& param,
                                                    std::function<void()> hook) {
  std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(param);
  if (!acc) return nullptr;  // not a leaf that requires grad
  acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [hook = std::move(hook)](const torch::autograd::variable_list& outputs,
                               const torch::autograd::variable_list&) {
        hook();
        return outputs;
      }));
  return acc;
}

void set_autocast(c10::DeviceType device_type, std::optional<at::ScalarType> dtype) {
  if (device_type == c10::DeviceType::CUDA) {
    if (dtype) at::autocast::set_autocast_gpu_dtype(*dtype);
    at::autocast::set_enabled(dtype.has_value());
  } else {
    if (dtype) at::autocast::set_autocast_cpu_dtype(*dtype);
    at::autocast::set_cpu_enabled(dtype.has_value());
  }
  if (!dtype) at::autocast::clear_cache();
}

bool cpu_bf16_autocast_works() {
  return TORCH_VERSION_MAJOR >= 2;
}

void resize_storage(const at::Tensor& t, std::size_t bytes) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == bytes) return;
  impl->set_data_ptr_noswap(impl->allocator()->allocate(bytes));
  impl->set_nbytes(bytes);
}

}  // namespace stratagem::runtime::compat
