#pragma once
// What each rank has issued and is executing, so that a collective that times out can name
// the ranks that never reached it and the op each was last at. Every communicator keeps one
// RankProgress per rank: the store-backed ProgressBoard (Gloo, NCCL) publishes it a few times a
// second; the in-process backend reads it directly. No LibTorch here.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace stratagem::comm {

class Store;

/// "0,1,2,3": the key of a process group (sorted global ranks).
std::string group_key(const std::vector<int>& ranks);
/// "[0,1,2,3]"
std::string group_text(const std::vector<int>& ranks);

struct OpRef {
  std::string op;         ///< "all_reduce", ...
  std::string group;      ///< group_key
  std::uint64_t seq = 0;  ///< index among the collectives this rank issued on the group
};

/// "all_reduce #5 on [0,1]"
std::string describe(const OpRef& op);

struct RankProgress {
  std::map<std::string, std::uint64_t> issued;  ///< group key → collectives issued on it
  std::optional<OpRef> last_issued;
  std::optional<OpRef> running;  ///< the op this rank's communicator is executing, if known
  std::string last_p2p;          ///< "recv from rank 2 (tag 7)": the last send/recv posted
  std::string failed;            ///< why this rank stopped, when it did

  std::string serialize() const;
  static RankProgress parse(const std::string& text);
};

/// A sentence for the error of collective `op` number `seq` on `group`, from the members'
/// records (nullopt: no record). Example: "rank 2 has not reached it (last issued:
/// reduce_scatter #3 on [0,2]); rank 3 has not reached it (issued no collective yet)". Members
/// that reached it and are not busy elsewhere are left out; `self` is skipped. A member
/// executing a different op at the same place is called out as a mismatch.
std::string describe_laggards(const std::vector<int>& group, std::uint64_t seq,
                              const std::string& op, int self,
                              const std::map<int, std::optional<RankProgress>>& records);

/// "rank 2: last issued all_reduce #3 on [0,2], executing ..., last p2p: ..." for a rank
/// that a send/recv waits on.
std::string describe_peer(int rank, const std::optional<RankProgress>& record);

/// This rank's record, published under "<prefix>progress/<rank>" by a background thread at
/// most every `period` when it changed.
/// How long a diagnosis waits for the store before saying it is unavailable.
inline constexpr std::chrono::milliseconds kDiagnoseLimit{5000};

class ProgressBoard {
 public:
  ProgressBoard(std::shared_ptr<Store> store, int rank,
                std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~ProgressBoard();
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  /// Records that `op` was issued on `group`; returns its sequence number there.
  std::uint64_t issue(const std::string& op, const std::vector<int>& group);
  void set_running(std::optional<OpRef> op);
  void set_failed(const std::string& why);
  void note_p2p(const std::string& what);

  /// The laggard sentence for collective `op` number `seq` on `group`, reading the other members'
  /// records from the store (bounded wait; an unreachable store is said so).
  std::string diagnose(const std::vector<int>& group, std::uint64_t seq, const std::string& op);
  /// describe_peer() for `rank`, from the store.
  std::string diagnose_peer(int rank);

 private:
  void publish_loop();
  /// Fetches the records of `ranks` from the store on a thread of its own and waits at most
  /// kDiagnoseLimit: a stopped store host must not turn a timeout into a hang.
  std::map<int, std::optional<RankProgress>> fetch_bounded(const std::vector<int>& ranks);

  std::shared_ptr<Store> store_;
  int rank_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  RankProgress mine_;
  std::uint64_t version_ = 1;  // > 0: publish the empty record at once ("issued nothing yet")
  bool stop_ = false;
  std::shared_ptr<std::timed_mutex> store_mu_ = std::make_shared<std::timed_mutex>();
  std::thread publisher_;
};

}  // namespace stratagem::comm
