#include "engine/comm/communicator.hpp"

#include "engine/comm/gloo_communicator.hpp"
#include "engine/comm/nccl_backend.hpp"
#include "engine/comm/store.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {

std::unique_ptr<Communicator> make_communicator(const launch::DistEnv& env,
                                                std::shared_ptr<Store> store,
                                                const std::string& backend,
                                                std::chrono::milliseconds timeout) {
  if (backend == "gloo") {
    return make_gloo_communicator(std::move(store), env.rank, env.world_size,
                                  gloo_options_for(env, timeout));
  }
  if (backend == "nccl") {
    const NcclFactory factory = nccl_backend();
    if (!factory) {
      throw SpecError("backend",
                      "this program was linked without Stratagem's NCCL backend (link "
                      "Stratagem::nccl, built when CUDA and NCCL are found; or run on CPUs with "
                      "gloo)");
    }
    return factory(std::move(store), env.rank, env.world_size, env.local_rank, timeout);
  }
  throw SpecError("backend",
                  "unknown communicator backend \"" + backend + "\" (expected gloo or nccl)");
}

std::unique_ptr<Communicator> make_communicator(const launch::DistEnv& env,
                                                const std::string& backend,
                                                std::chrono::milliseconds timeout) {
  if (backend != "gloo" && backend != "nccl") {
    return make_communicator(env, nullptr, backend, timeout);  // throws the SpecError
  }
  return make_communicator(env, rendezvous(env, timeout), backend, timeout);
}

}  // namespace stratagem::comm
