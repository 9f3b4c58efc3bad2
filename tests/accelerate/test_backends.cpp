// The NCCL backend is a library of its own (engine/comm/nccl_backend.hpp): a program linking
// only Stratagem::accelerate (as this test does) has none registered, and asking for it is
// one clear error before any rendezvous, not a link against CUDA.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/comm/communicator.hpp"
#include "engine/comm/nccl_backend.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::test {
namespace {

TEST(AccelerateBackends, NcclIsNotRegisteredWithoutItsLibrary) {
  EXPECT_EQ(comm::nccl_backend(), nullptr);
  launch::DistEnv env;  // a lone process: the comm::rendezvous would be local
  try {
    comm::make_communicator(env, nullptr, "nccl", std::chrono::seconds(1));
    FAIL() << "asking for nccl without its library must throw";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("linked without Stratagem's NCCL backend"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Stratagem::nccl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stratagem::test
