#pragma once
// The communicator the executor and the Accelerator use: exactly the operations the plan IR
// emits, each returning an async Work. Backends: Gloo (CPU tensors, libgloo algorithms over a
// c10d TCPStore), NCCL (CUDA tensors, raw NCCL), and an in-process threaded backend for tests.
// Tensors must be contiguous; reduce ops sum (divide yourself for means).
//
// Ordering: every member must issue the collectives of a group in the same order (the plan
// guarantees it); a backend may run one rank's collectives one after another in issue order,
// as a CUDA stream would. Point-to-point ops never wait behind collectives. A collective that
// times out names the ranks that did not reach it and the op each was last at.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

namespace stratagem::launch {
struct DistEnv;
}  // namespace stratagem::launch

namespace stratagem::comm {

enum class ReduceOp { sum, max };

/// An operation in flight. wait() throws RuntimeError on failure or timeout (naming the op,
/// the group and the peer ranks that did not arrive when the backend can tell).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  /// Returns when done; throws on error or after `timeout` (0: the communicator's default).
  virtual void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) = 0;
};
using WorkPtr = std::shared_ptr<Work>;

/// A process group: global ranks, sorted. Communicators create subgroups on demand, keyed by
/// their rank list, identically on every member.
struct GroupSpec {
  std::vector<int> ranks;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;
  /// The default for Work::wait(0) and barrier().
  virtual std::chrono::milliseconds timeout() const = 0;

  /// In place on `tensor` across `group` (empty = world).
  virtual WorkPtr all_reduce(at::Tensor tensor, const GroupSpec& group, ReduceOp op) = 0;
  /// `input` has n·k elements (n = group size); this rank's summed shard (k elements, at the
  /// rank's index in the group) is written to `output`. `input` is left unchanged.
  virtual WorkPtr reduce_scatter(at::Tensor output, at::Tensor input, const GroupSpec& group) = 0;
  /// `input` has k elements; `output` n·k, filled in group order.
  virtual WorkPtr all_gather(at::Tensor output, at::Tensor input, const GroupSpec& group) = 0;
  /// `root` is a global rank, member of `group`.
  virtual WorkPtr broadcast(at::Tensor tensor, int root, const GroupSpec& group) = 0;
  /// Point-to-point; `tag` pairs a send with its recv (the plan's transfer index). NCCL pairs
  /// them by order between two ranks, so post them in the same order on both sides.
  virtual WorkPtr send(at::Tensor tensor, int peer, std::uint32_t tag) = 0;
  virtual WorkPtr recv(at::Tensor tensor, int peer, std::uint32_t tag) = 0;
  /// Blocks until every member of `group` reached it (ordered after this rank's collectives
  /// issued before it); throws after timeout().
  virtual void barrier(const GroupSpec& group) = 0;
};

class Store;

/// The communicator of this process for `backend` "gloo" (CPU tensors) or "nccl" (CUDA
/// tensors; SpecError when the program was not linked with the NCCL backend, see
/// nccl_backend.hpp): rendezvous (see store.hpp), then the backend's setup. `timeout` bounds the rendezvous and is every op's default wait.
/// At the end of a job call barrier({}) before destroying it: rank 0 hosts the store that
/// late subgroup set-ups of other ranks may still need.
std::unique_ptr<Communicator> make_communicator(const launch::DistEnv& env,
                                                const std::string& backend,
                                                std::chrono::milliseconds timeout);
/// The same over a store from rendezvous(), which the caller may use for its own keys.
std::unique_ptr<Communicator> make_communicator(const launch::DistEnv& env,
                                                std::shared_ptr<Store> store,
                                                const std::string& backend,
                                                std::chrono::milliseconds timeout);

}  // namespace stratagem::comm
