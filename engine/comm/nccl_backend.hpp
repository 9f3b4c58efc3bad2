#pragma once
// Where the NCCL backend plugs in. The NCCL communicator lives in its own library
// (stratagem_nccl, exported as Stratagem::nccl), so a CPU program linking Stratagem never
// links or loads CUDA: make_communicator() asks nccl_backend() for the factory, which that
// library registers when it is linked (its link interface forces in the one object file that
// does it, see nccl_registration.cpp). Without it, asking for "nccl" is one SpecError.
#include <chrono>
#include <memory>

namespace stratagem::comm {

class Communicator;
class Store;

using NcclFactory = std::unique_ptr<Communicator> (*)(std::shared_ptr<Store> store, int rank,
                                                      int world_size, int local_rank,
                                                      std::chrono::milliseconds timeout);

/// The registered factory, or nullptr when the NCCL backend is not linked into this program.
NcclFactory nccl_backend();
/// Called once by the NCCL library's registration (static initialisation).
void register_nccl_backend(NcclFactory factory);

}  // namespace stratagem::comm
