#pragma once
// Setting up libgloo for the Gloo communicator: the TCP device, full-mesh contexts whose
// addresses travel through our Store (a timeout names the ranks that never joined), and the
// dtypes gloo can reduce. Internal to the runtime; includes gloo and ATen headers.
#include <ATen/ATen.h>
#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/scenario/error.hpp"

namespace stratagem::comm {

class Store;

/// A TCP device on `iface` when given, else on the address `hostname` resolves to.
std::shared_ptr<gloo::transport::Device> open_gloo_device(const std::string& hostname,
                                                          const std::string& iface);

/// Connects this rank (global `rank`, a member of `group`) to every other member, exchanging
/// addresses under `key_prefix` in the store. Throws RuntimeError naming the members that did
/// not join within `timeout` (also every op's default timeout on the context).
std::shared_ptr<gloo::Context> connect_gloo_context(
    const std::shared_ptr<Store>& store, const std::string& key_prefix,
    const std::vector<int>& group, int rank, std::chrono::milliseconds timeout,
    const std::shared_ptr<gloo::transport::Device>& device, const std::string& what);

/// Calls f.template operator()<T>() with T the C++ type of dtype `t`, for the dtypes gloo
/// reduces; throws RuntimeError naming `op` otherwise.
template <typename F>
void dispatch_reducible(at::ScalarType t, const std::string& op, F&& f) {
  switch (t) {
    case at::kFloat:
      return f.template operator()<float>();
    case at::kDouble:
      return f.template operator()<double>();
    case at::kHalf:
      return f.template operator()<at::Half>();
    case at::kBFloat16:
      return f.template operator()<at::BFloat16>();
    case at::kInt:
      return f.template operator()<int32_t>();
    case at::kLong:
      return f.template operator()<int64_t>();
    case at::kByte:
      return f.template operator()<uint8_t>();
    default:
      throw RuntimeError(op + ": the Gloo backend cannot reduce dtype " +
                         std::string(c10::toString(t)));
  }
}

}  // namespace stratagem::comm
