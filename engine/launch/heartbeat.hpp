#pragma once
// Liveness for jobs `stratagem launch` / `run` start: a channel from each worker to the
// launcher that depends on no other worker and no rendezvous store.
//
// Worker side (`Heartbeat`): when the launcher set STRATAGEM_HEARTBEAT_FD, a thread writes one
// line "<progress> <what>" to that pipe every second; the program bumps `progress` as it works
// (the runtime at every op it starts, the Accelerator at each backward and step). A stopped
// process (SIGSTOP, a debugger) sends nothing; a wedged one (stuck in a collective or a lost
// socket) keeps beating without progress.
//
// Launcher side (`LivenessWatch`): a worker is watched from its first line on. The job is
// stalled when a watched worker has sent nothing for `limit` (that rank is named), or when no
// watched worker has made progress for `limit` (the one furthest behind is named, with the
// op it is in: the others wait for it). As NCCL's watchdog and torchrun's health checks do,
// but without trusting the rank that hosts the store.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace stratagem::launch {

inline constexpr const char* kHeartbeatFdEnv = "STRATAGEM_HEARTBEAT_FD";

/// This process's heartbeat (one per process; inert without STRATAGEM_HEARTBEAT_FD). The
/// thread stops at static destruction.
class Heartbeat {
 public:
  using Describe = std::function<std::string(std::uint64_t item)>;
  /// Starts the beating thread if the launcher asked for it; later calls do nothing.
  static void start_from_env();
  /// Records progress: `what` is the work now under way ("backward", "rendezvous at …").
  static void progress(const std::string& what);
  /// Records progress on `item` (an op id) without building its text: two relaxed atomic
  /// stores, cheap enough for every op the executor starts. A beat describes the latest item
  /// with the function a `Describer` installed.
  static void tick(std::uint64_t item);
  /// Installs how items are described for as long as it lives (the plan it reads must).
  class Describer {
   public:
    explicit Describer(Describe describe);
    ~Describer();
    Describer(const Describer&) = delete;
    Describer& operator=(const Describer&) = delete;
  };
};

class LivenessWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LivenessWatch(std::chrono::milliseconds limit) : limit_(limit) {}

  /// A line "<progress> <what>" from `rank` at `now` (malformed lines are ignored).
  void beat(int rank, const std::string& line, Clock::time_point now);
  /// The rank has exited: no longer watched.
  void forget(int rank);
  struct Stall {
    int rank = -1;    ///< the silent rank, or the one furthest behind
    std::string why;  ///< one sentence naming it and its op
  };
  /// Whether the job is stalled at `now`; nothing while it is alive.
  std::optional<Stall> stalled(Clock::time_point now) const;

 private:
  struct Rank {
    std::uint64_t progress = 0;
    std::string what;
    Clock::time_point last_beat{}, last_progress{};
  };
  std::chrono::milliseconds limit_;
  std::map<int, Rank> ranks_;
};

}  // namespace stratagem::launch
