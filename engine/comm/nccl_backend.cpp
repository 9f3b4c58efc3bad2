#include "engine/comm/nccl_backend.hpp"

#include <atomic>

namespace stratagem::comm {

namespace {
std::atomic<NcclFactory>& slot() {
  static std::atomic<NcclFactory> factory{nullptr};
  return factory;
}
}  // namespace

NcclFactory nccl_backend() { return slot().load(); }

void register_nccl_backend(NcclFactory factory) { slot().store(factory); }

}  // namespace stratagem::comm
