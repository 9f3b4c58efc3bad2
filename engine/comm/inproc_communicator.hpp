#pragma once
// The in-process backend: n communicators that meet in shared memory, one per thread, for fast
// and deterministic tests of executors and of the Communicator contract. Reductions add the
// members' tensors in group order, so results are identical from run to run; the last rank to
// arrive at a collective computes it for all. Fault injection: a rank that never issues an op
// makes the others' wait(timeout) name it; fail() makes a rank fail outright.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.hpp"

namespace stratagem::comm {

class InprocWorld;

class InprocCommunicator : public Communicator {
 public:
  InprocCommunicator(std::shared_ptr<InprocWorld> world, int rank);

  int rank() const override { return rank_; }
  int world_size() const override;
  std::string backend() const override { return "inproc"; }
  std::chrono::milliseconds timeout() const override;

  WorkPtr all_reduce(at::Tensor tensor, const GroupSpec& group, ReduceOp op) override;
  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input, const GroupSpec& group) override;
  WorkPtr all_gather(at::Tensor output, at::Tensor input, const GroupSpec& group) override;
  WorkPtr broadcast(at::Tensor tensor, int root, const GroupSpec& group) override;
  WorkPtr send(at::Tensor tensor, int peer, std::uint32_t tag) override;
  WorkPtr recv(at::Tensor tensor, int peer, std::uint32_t tag) override;
  void barrier(const GroupSpec& group) override;

  /// Fault injection: this rank fails with `why`. Its pending and later ops fail, and so do
  /// the other ranks' ops that involve it, each naming this rank and `why`.
  void fail(const std::string& why);

 private:
  std::shared_ptr<InprocWorld> world_;
  int rank_;
};

/// n communicators sharing one world; hand communicator i to thread i. `timeout` is every
/// op's default wait.
std::vector<std::unique_ptr<Communicator>> make_inproc_world(
    int n, std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace stratagem::comm
