// Reading the launcher's environment (torchrun, Slurm, mpirun) and the rendezvous through the
// TCPStore: who arrives, who is missing, ports in use, the communicator factory.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <thread>

#include <ATen/Context.h>

#include "engine/comm/communicator.hpp"
#include "engine/comm/store.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/launch/ports.hpp"
#include "engine/scenario/error.hpp"
#include "tests/runtime/test_comm_util.hpp"

namespace stratagem::test {
namespace {

using launch::DistEnv;
using launch::parse_dist_env;
using std::chrono::milliseconds;
using Vars = std::map<std::string, std::string>;

Vars torchrun(int rank, int world, int local, int local_world) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(local)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
          {"GROUP_RANK", std::to_string(rank / local_world)},
          {"MASTER_ADDR", "10.0.0.7"},
          {"MASTER_PORT", "29511"}};
}

// The variable a SpecError names.
std::string spec_path(const Vars& vars) {
  try {
    launch::parse_dist_env(vars);
  } catch (const SpecError& e) {
    return e.path();
  }
  return "(no error)";
}

TEST(DistEnv, ReadsTorchrunVariables) {
  auto vars = torchrun(5, 8, 1, 4);
  vars["STRATAGEM_LAUNCHER"] = "stratagem";
  const launch::DistEnv env = launch::parse_dist_env(vars);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.node_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.7");
  EXPECT_EQ(env.master_port, 29511);
  EXPECT_EQ(env.launcher, "stratagem");
  EXPECT_FALSE(env.use_agent_store);
  EXPECT_EQ(launch::describe(env),
            "rank 5/8 (local 1/4, node 1) via stratagem, master 10.0.0.7:29511");
  vars.erase("STRATAGEM_LAUNCHER");
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars["TORCHELASTIC_RESTART_COUNT"] = "2";
  const launch::DistEnv agent = launch::parse_dist_env(vars);
  EXPECT_EQ(agent.launcher, "torchrun");
  EXPECT_TRUE(agent.use_agent_store);
  EXPECT_EQ(agent.restart_count, 2);
}

TEST(DistEnv, ReadsSlurmVariables) {
  Vars vars = {{"SLURM_PROCID", "6"},
               {"SLURM_NTASKS", "7"},
               {"SLURM_LOCALID", "1"},
               {"SLURM_NODEID", "2"},
               {"SLURM_TASKS_PER_NODE", "3(x2),2"},
               {"MASTER_ADDR", "gpu-a01"}};
  const launch::DistEnv env = launch::parse_dist_env(vars);
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 7);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.node_rank, 2);
  EXPECT_EQ(env.master_addr, "gpu-a01");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(launch::slurm_tasks_on_node("4(x2)", 1, "V"), 4);
  EXPECT_EQ(launch::slurm_tasks_on_node("2,3(x2)", 2, "V"), 3);
  EXPECT_THROW(launch::slurm_tasks_on_node("4(x2)", 2, "V"), SpecError);
  EXPECT_THROW(launch::slurm_tasks_on_node("4(2)", 0, "V"), SpecError);
  vars.erase("MASTER_ADDR");
  EXPECT_EQ(spec_path(vars), "MASTER_ADDR");
  vars["MASTER_ADDR"] = "gpu-a01";
  // The step's layout wins over the job's: one task per node leaves no room for local id 1.
  vars["SLURM_STEP_TASKS_PER_NODE"] = "1(x7)";
  EXPECT_EQ(spec_path(vars), "SLURM_LOCALID");
}

TEST(DistEnv, ReadsOpenMpiVariables) {
  const Vars vars = {{"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                     {"MASTER_ADDR", "host0"},
                     {"MASTER_PORT", "12345"}};
  const launch::DistEnv env = launch::parse_dist_env(vars);
  EXPECT_EQ(env.launcher, "mpirun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.node_rank, 1);
  EXPECT_EQ(env.master_port, 12345);
}

TEST(DistEnv, NamesTheMissingOrContradictoryVariable) {
  auto vars = torchrun(0, 2, 0, 2);
  vars.erase("LOCAL_WORLD_SIZE");
  EXPECT_EQ(spec_path(vars), "LOCAL_WORLD_SIZE");
  vars = torchrun(0, 2, 0, 2);
  vars["RANK"] = "2";
  EXPECT_EQ(spec_path(vars), "RANK");
  vars = torchrun(0, 2, 0, 2);
  vars["WORLD_SIZE"] = "two";
  EXPECT_EQ(spec_path(vars), "WORLD_SIZE");
  vars = torchrun(1, 2, 1, 2);
  vars["LOCAL_RANK"] = "2";
  EXPECT_EQ(spec_path(vars), "LOCAL_RANK");
  vars = torchrun(1, 4, 1, 2);
  vars["LOCAL_WORLD_SIZE"] = "8";
  EXPECT_EQ(spec_path(vars), "LOCAL_WORLD_SIZE");
  vars = torchrun(0, 2, 0, 2);
  vars["MASTER_PORT"] = "70000";
  EXPECT_EQ(spec_path(vars), "MASTER_PORT");
  EXPECT_EQ(spec_path({{"WORLD_SIZE", "2"}}), "RANK");
  const launch::DistEnv lone = launch::parse_dist_env({});
  EXPECT_EQ(lone.launcher, "none");
  EXPECT_EQ(lone.world_size, 1);
}

launch::DistEnv local_env(int rank, int world, int port) {
  launch::DistEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.launcher = "stratagem";
  return env;
}

TEST(Rendezvous, AllRanksMeetAndShareTheStore) {
  const int port = launch::find_free_port();
  std::vector<std::string> seen(3);
  const auto errors = run_ranks(3, [&](int r) {
    auto store = comm::rendezvous(local_env(r, 3, port), milliseconds(10000));
    store->set("hello/" + std::to_string(r), "from " + std::to_string(r));
    seen[static_cast<std::size_t>(r)] = store->get("hello/" + std::to_string((r + 1) % 3));
    store->add("done", 1);
    // Rank 0 hosts the store: it stays until everyone has read.
    if (r == 0) {
      while (store->add("done", 0) < 3) std::this_thread::sleep_for(milliseconds(5));
    }
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  EXPECT_EQ(seen, (std::vector<std::string>{"from 1", "from 2", "from 0"}));
}

TEST(Rendezvous, TimeoutNamesTheRanksThatNeverArrived) {
  const int port = launch::find_free_port();
  const auto errors =
      run_ranks(2, [&](int r) { comm::rendezvous(local_env(r, 4, port), milliseconds(500)); });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& m : errors) {
    EXPECT_NE(m.find("rendezvous at 127.0.0.1:" + std::to_string(port) + " timed out after 500 ms"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("ranks 2, 3 of 4 did not arrive"), std::string::npos) << m;
  }
}

TEST(Rendezvous, DisagreeingWorldSizesAreReported) {
  const int port = launch::find_free_port();
  const auto errors = run_ranks(
      2, [&](int r) { comm::rendezvous(local_env(r, r == 0 ? 3 : 2, port), milliseconds(800)); });
  ASSERT_EQ(errors.size(), 2u) << joined(errors);
  const std::string all = joined(errors);
  EXPECT_NE(all.find("rank 1 has WORLD_SIZE=2 but rank 0"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 2 of 3 did not arrive"), std::string::npos) << all;
}

TEST(Ports, FreePortsComeFromBelowTheEphemeralRangeAndDiffer) {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  std::set<int> seen;
  for (int i = 0; i < 8; ++i) {
    const int port = launch::find_free_port();
    EXPECT_GE(port, 1024);
    EXPECT_LT(port, low) << "a port the kernel may hand to any connection";
    launch::check_port_free(port);  // still free: nothing else takes it
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 4u) << "concurrent jobs would collide";
}

TEST(Rendezvous, APortInUseIsNamed) {
  // Hold a port the way another job would.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  try {
    comm::rendezvous(local_env(0, 2, port), milliseconds(500));
    ADD_FAILURE() << "rendezvous started on a port in use";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(port) +
                                         " is already in use on this machine"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(launch::check_port_free(port), RuntimeError);
  ::close(fd);
}

// A listener that resets every connection it accepts (SO_LINGER 0), as a store going away
// does, on the port before the job's own store takes it: the client connects again and
// announces itself once the real store is there, instead of failing the job.
TEST(Rendezvous, AClientConnectsAgainAfterTheOtherEndResetsIt) {
  const int port = launch::find_free_port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  std::atomic<int> resets{0};
  std::thread resetter([&] {
    while (true) {
      const int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) return;  // the listener was shut down
      // Let the client's first request arrive, then drop the connection with a reset.
      std::this_thread::sleep_for(milliseconds(20));
      const linger abort_now{1, 0};
      ::setsockopt(c, SOL_SOCKET, SO_LINGER, &abort_now, sizeof(abort_now));
      ::close(c);
      ++resets;
    }
  });
  std::string client_error;
  std::thread client([&] {
    try {
      auto store = comm::rendezvous(local_env(1, 2, port), milliseconds(20000));
      store->add("done", 1);
    } catch (const std::exception& e) {
      client_error = e.what();
    }
  });
  // The client meets the resetting listener a few times (its probes count too).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (resets < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  resetter.join();
  EXPECT_GE(resets.load(), 3);
  std::string server_error;
  try {
    auto store = comm::rendezvous(local_env(0, 2, port), milliseconds(20000));
    while (store->add("done", 0) < 1) std::this_thread::sleep_for(milliseconds(5));
  } catch (const std::exception& e) {
    server_error = e.what();
  }
  client.join();
  EXPECT_EQ(client_error, "");
  EXPECT_EQ(server_error, "");
}

TEST(Rendezvous, AnUnreachableStoreIsNamed) {
  const int port = launch::find_free_port();  // nobody listens there
  try {
    comm::rendezvous(local_env(1, 2, port), milliseconds(400));
    ADD_FAILURE() << "connected to nobody";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1: cannot reach the rendezvous store at "
                                         "127.0.0.1:" +
                                         std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

TEST(Rendezvous, FactoryBuildsGlooCommunicators) {
  const int port = launch::find_free_port();
  const auto errors = run_ranks(2, [&](int r) {
    auto c = comm::make_communicator(local_env(r, 2, port), "gloo", milliseconds(10000));
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->world_size(), 2);
    EXPECT_EQ(c->timeout(), milliseconds(10000));
    auto t = at::full({2}, static_cast<float>(r + 1));
    c->all_reduce(t, {}, comm::ReduceOp::sum)->wait();
    expect_equal(t, at::full({2}, 3.0), "factory all_reduce");
    c->barrier({});
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
  EXPECT_THROW(comm::make_communicator(local_env(0, 1, port), "mpi", milliseconds(100)), SpecError);
}

#ifdef STRATAGEM_HAVE_NCCL
TEST(Rendezvous, NcclWithoutAGpuFailsClearly) {
  if (at::hasCUDA()) GTEST_SKIP() << "this LibTorch has CUDA: the NCCL path can really run";
  const int port = launch::find_free_port();
  try {
    comm::make_communicator(local_env(0, 1, port), "nccl", milliseconds(5000));
    ADD_FAILURE() << "an NCCL communicator without a GPU";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("CUDA") != std::string::npos || m.find("GPU") != std::string::npos) << m;
  }
}
#else
TEST(Rendezvous, NcclIsRefusedWhenNotBuilt) {
  const int port = launch::find_free_port();
  EXPECT_THROW(comm::make_communicator(local_env(0, 1, port), "nccl", milliseconds(5000)),
               SpecError);
}
#endif

}  // namespace
}  // namespace stratagem::test
