#include "engine/runtime/torch_compat.hpp"

#include <c10/util/Exception.h>
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

}  // namespace stratagem::runtime::compat
