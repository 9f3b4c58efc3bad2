// Registers the NCCL communicator with make_communicator() when stratagem_nccl is linked.
// The library's link interface names stratagem_nccl_backend_anchor as an undefined symbol
// (-Wl,--undefined), so the linker takes this object file from the archive and its static
// initialiser runs before main.
#include "engine/comm/nccl_backend.hpp"
#include "engine/comm/nccl_communicator.hpp"

namespace stratagem::comm {
namespace {

std::unique_ptr<Communicator> make(std::shared_ptr<Store> store, int rank, int world_size,
                                   int local_rank, std::chrono::milliseconds timeout) {
  return make_nccl_communicator(std::move(store), rank, world_size, local_rank, timeout);
}

const bool registered = (register_nccl_backend(&make), true);

}  // namespace
}  // namespace stratagem::comm

extern "C" const bool* stratagem_nccl_backend_anchor() {
  return &stratagem::comm::registered;
}
