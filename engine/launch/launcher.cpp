#include "engine/launch/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <sstream>

#include "engine/launch/child_process.hpp"
#include "engine/launch/group_reaper.hpp"
#include "engine/launch/heartbeat.hpp"
#include "engine/launch/ports.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The launcher's SIGINT/SIGTERM handler only writes the signal number into this pipe; the
// poll loop reads it. One launch at a time per process (signals are process-wide).
int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Installs the handlers for the duration of launch() and restores the previous ones.
class SignalGuard {
 public:
  SignalGuard() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw RuntimeError(std::string("launcher: pipe: ") + std::strerror(errno));
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalGuard() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_pipe_ {};
};

// A worker's output stream: bytes are cut into lines; a partial line waits for its newline.
struct Stream {
  int fd = -1;
  bool is_stderr = false;
  bool is_heartbeat = false;
  std::string partial;
};

struct Worker {
  WorkerExit exit;
  bool running = true;
  Stream out;
  Stream err;
  Stream beat;  // heartbeat lines (heartbeat.hpp), not output
  std::deque<std::string> tail;
};

// Lines longer than this are passed on in pieces so a worker cannot grow our buffers unbounded.
constexpr std::size_t kMaxLine = 64 * 1024;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, int port)
      : o_(o), port_(port), liveness_(std::chrono::duration_cast<std::chrono::milliseconds>(
                                o.liveness)) {
    if (!o_.on_line) {
      o_.on_line = [](int rank, bool is_stderr, const std::string& line) {
        std::FILE* f = is_stderr ? stderr : stdout;
        std::fprintf(f, "[rank %d] %s\n", rank, line.c_str());
        std::fflush(f);
      };
    }
  }

  ~Supervisor() {
    // Reached normally only after every worker was reaped; on an exception, end them here.
    for (auto& w : workers_) {
      if (w.running) {
        ::kill(-w.exit.pid, SIGKILL);
        ::waitpid(w.exit.pid, nullptr, 0);
      }
      close_fd(w.out.fd);
      close_fd(w.err.fd);
      close_fd(w.beat.fd);
    }
  }

  void spawn_all(const std::vector<std::string>& argv) {
    const std::string path = resolve_executable(argv[0]);
    const int world = o_.num_processes * o_.num_machines;
    for (int local = 0; local < o_.num_processes; ++local) {
      const int rank = o_.machine_rank * o_.num_processes + local;
      std::vector<std::pair<std::string, std::string>> vars = {
          {"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(local)},
          {"LOCAL_WORLD_SIZE", std::to_string(o_.num_processes)},
          {"GROUP_RANK", std::to_string(o_.machine_rank)},
          {"GROUP_WORLD_SIZE", std::to_string(o_.num_machines)},
          {"ROLE_RANK", std::to_string(rank)},
          {"ROLE_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", o_.main_process_ip},
          {"MASTER_PORT", std::to_string(port_)},
          {"STRATAGEM_LAUNCHER", "stratagem"},
          {kHeartbeatFdEnv, std::to_string(kChildHeartbeatFd)}};
      vars.insert(vars.end(), o_.env.begin(), o_.env.end());
      spawn(path, argv, environment_with(vars), rank, local);
    }
  }

  LaunchResult run() {
    const auto start = Clock::now();
    while (true) {
      reap();
      if (all_reaped() && open_streams() == 0) break;
      const auto now = Clock::now();
      if (o_.timeout.count() > 0 && !ending_ && now - start >= o_.timeout) {
        timed_out_ = true;
        begin_ending();
      }
      if (!ending_) {
        if (auto stall = liveness_.stalled(now)) {
          stalled_ = std::move(*stall);
          begin_ending();
        }
      }
      if (ending_ && !killed_ && now >= kill_deadline_) {
        for (auto& w : workers_) {
          if (w.running) ::kill(-w.exit.pid, SIGKILL);
        }
        killed_ = true;
      }
      // Once every worker is gone, a descendant that escaped its process group could keep a
      // pipe open; stop reading after a grace period.
      if (all_reaped()) {
        if (!drain_deadline_) drain_deadline_ = now + o_.kill_grace;
        if (now >= *drain_deadline_) break;
      }
      poll_once(50);
    }
    for (auto& w : workers_) {
      flush_partial(w, w.out);
      flush_partial(w, w.err);
      close_fd(w.out.fd);
      close_fd(w.err.fd);
      close_fd(w.beat.fd);
    }
    return result();
  }

 private:
  void spawn(const std::string& path, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, int rank, int local) {
    // A worker that cannot start throws here; ~Supervisor then ends those already running.
    const ChildProcess child = spawn_child(path, argv, env);
    reaper_.watch(child.pid);  // its process group, should this launcher be killed
    Worker w;
    w.exit.rank = rank;
    w.exit.local_rank = local;
    w.exit.pid = child.pid;
    w.out.fd = child.out_fd;
    w.err.fd = child.err_fd;
    w.err.is_stderr = true;
    w.beat.fd = child.beat_fd;
    w.beat.is_heartbeat = true;
    workers_.push_back(std::move(w));
  }

  void poll_once(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, Stream*>> owners;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (auto& w : workers_) {
      for (Stream* s : {&w.out, &w.err, &w.beat}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        owners.emplace_back(&w, s);
      }
    }
    const int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r <= 0) return;
    if (fds[0].revents & POLLIN) {
      unsigned char sig = 0;
      while (::read(g_signal_pipe[0], &sig, 1) == 1) {
        if (!interrupted_by_) interrupted_by_ = sig;
      }
      if (interrupted_by_ && !ending_) begin_ending();
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
        read_stream(*owners[i].first, *owners[i].second);
    }
  }

  void read_stream(Worker& w, Stream& s) {
    char buf[16384];
    while (true) {
      const ssize_t n = ::read(s.fd, buf, sizeof(buf));
      if (n > 0) {
        s.partial.append(buf, static_cast<std::size_t>(n));
        std::size_t begin = 0;
        for (std::size_t nl; (nl = s.partial.find('\n', begin)) != std::string::npos;
             begin = nl + 1) {
          emit(w, s, s.partial.substr(begin, nl - begin));
        }
        s.partial.erase(0, begin);
        if (s.partial.size() >= kMaxLine) flush_partial(w, s);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      flush_partial(w, s);  // EOF or error: the worker closed this end
      close_fd(s.fd);
      return;
    }
  }

  void flush_partial(Worker& w, Stream& s) {
    if (s.partial.empty()) return;
    emit(w, s, s.partial);
    s.partial.clear();
  }

  void emit(Worker& w, const Stream& s, std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (s.is_heartbeat) {
      if (w.running) liveness_.beat(w.exit.rank, line, Clock::now());
      return;
    }
    o_.on_line(w.exit.rank, s.is_stderr, line);
    if (o_.tail_lines > 0) {
      w.tail.push_back(std::move(line));
      while (static_cast<int>(w.tail.size()) > o_.tail_lines) w.tail.pop_front();
    }
  }

  void reap() {
    // Several workers found dead in one pass died within one poll interval; a signal is the
    // likelier cause (a crash makes its peers fail, rarely the reverse), then the lower rank.
    int first = -1;
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.exit.pid, &status, WNOHANG);
      if (r != w.exit.pid) continue;
      w.running = false;
      liveness_.forget(w.exit.rank);
      close_fd(w.beat.fd);  // a descendant keeping it open must not keep the rank watched
      // Anything the worker started in its group goes with it: no orphans.
      ::kill(-w.exit.pid, SIGKILL);
      if (WIFEXITED(status)) {
        w.exit.exited = true;
        w.exit.code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        w.exit.signaled = true;
        w.exit.code = WTERMSIG(status);
      }
      // Ended by us: it died of the signal we sent after the first failure or interrupt.
      w.exit.ended_by_launcher =
          ending_ && w.exit.signaled && (w.exit.code == SIGTERM || w.exit.code == SIGKILL);
      const bool failed = w.exit.signaled || w.exit.code != 0;
      const int index = static_cast<int>(&w - workers_.data());
      if (failed && !ending_ &&
          (first < 0 ||
           (w.exit.signaled && !workers_[static_cast<std::size_t>(first)].exit.signaled))) {
        first = index;
      }
    }
    if (first >= 0 && first_failure_ < 0) {
      first_failure_ = first;
      begin_ending();
    }
  }

  void begin_ending() {
    ending_ = true;
    kill_deadline_ = Clock::now() + o_.kill_grace;
    for (auto& w : workers_) {
      if (w.running) ::kill(-w.exit.pid, SIGTERM);
    }
  }

  bool all_reaped() const {
    for (const auto& w : workers_) {
      if (w.running) return false;
    }
    return true;
  }

  int open_streams() const {
    int n = 0;
    for (const auto& w : workers_) n += (w.out.fd >= 0) + (w.err.fd >= 0);
    return n;
  }

  static void last_output(std::ostream& msg, const WorkerExit& w) {
    if (w.last_lines.empty()) return;
    msg << "\nlast output of rank " << w.rank << ":";
    for (const auto& line : w.last_lines) msg << "\n  " << line;
  }

  LaunchResult result() {
    LaunchResult r;
    r.main_process_port = port_;
    r.timed_out = timed_out_;
    r.stalled = stalled_.has_value();
    r.interrupted_by = interrupted_by_;
    for (auto& w : workers_) {
      w.exit.last_lines.assign(w.tail.begin(), w.tail.end());
      r.workers.push_back(w.exit);
    }
    std::ostringstream msg;
    if (first_failure_ >= 0) {
      const auto& f = r.workers[static_cast<std::size_t>(first_failure_)];
      r.first_failure = f;
      r.exit_code = f.signaled ? 128 + f.code : f.code;
      msg << "worker rank " << f.rank << " (pid " << f.pid << ") failed: " << describe_exit(f);
      last_output(msg, f);
    } else if (interrupted_by_) {
      r.exit_code = 128 + interrupted_by_;
      msg << "interrupted by " << signal_name(interrupted_by_);
    } else if (timed_out_) {
      r.exit_code = 124;
      msg << "the job did not finish within " << o_.timeout.count() << " s";
    } else if (stalled_) {
      r.exit_code = 124;
      msg << "the job stalled: " << stalled_->why << " (liveness bound " << o_.liveness.count()
          << " s, --liveness_timeout)";
      for (const auto& w : r.workers) {
        if (w.rank == stalled_->rank) last_output(msg, w);
      }
    }
    if (first_failure_ >= 0) {
      // Peers that failed on their own afterwards, usually because of the first failure.
      std::string also;
      for (const auto& w : r.workers) {
        const bool failed = w.signaled || w.code != 0;
        if (w.rank == r.first_failure->rank || w.ended_by_launcher || !failed) continue;
        also += (also.empty() ? "" : ", ") +
                ("rank " + std::to_string(w.rank) + " (" + describe_exit(w) + ")");
      }
      if (!also.empty()) msg << "\nthen also failed: " << also;
    }
    if (ending_) {
      std::vector<int> ended;
      for (const auto& w : r.workers) {
        if (w.ended_by_launcher) ended.push_back(w.rank);
      }
      if (!ended.empty()) {
        msg << "\nended the " << (first_failure_ >= 0 ? "other " : "") << "workers (rank"
            << (ended.size() > 1 ? "s" : "");
        for (std::size_t i = 0; i < ended.size(); ++i) msg << (i ? ", " : " ") << ended[i];
        msg << ")";
      }
    }
    r.message = msg.str();
    return r;
  }

  LaunchOptions o_;
  int port_;
  GroupReaper reaper_;  // destroyed after every worker was ended and reaped
  std::vector<Worker> workers_;
  bool ending_ = false;
  bool killed_ = false;
  bool timed_out_ = false;
  LivenessWatch liveness_;
  std::optional<LivenessWatch::Stall> stalled_;  // why the liveness bound ended the job
  int interrupted_by_ = 0;
  int first_failure_ = -1;
  Clock::time_point kill_deadline_{};
  std::optional<Clock::time_point> drain_deadline_;
};

void validate(const LaunchOptions& o, const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) throw SpecError("argv", "no worker command given");
  if (o.num_processes < 1) {
    throw SpecError("--num_processes",
                    "must be at least 1, got " + std::to_string(o.num_processes));
  }
  if (o.num_machines < 1) {
    throw SpecError("--num_machines", "must be at least 1, got " + std::to_string(o.num_machines));
  }
  if (o.machine_rank < 0 || o.machine_rank >= o.num_machines) {
    throw SpecError("--machine_rank", std::to_string(o.machine_rank) + " is outside [0, " +
                                          std::to_string(o.num_machines) + ")");
  }
  if (o.main_process_port < 0 || o.main_process_port > 65535) {
    throw SpecError("--main_process_port",
                    std::to_string(o.main_process_port) + " is not a TCP port");
  }
  if (o.main_process_port == 0 && o.num_machines > 1) {
    throw SpecError("--main_process_port",
                    "0 (pick a free port) works on one machine only; give every machine the "
                    "same port");
  }
  if (o.main_process_ip.empty()) throw SpecError("--main_process_ip", "empty");
  if (o.timeout.count() < 0) throw SpecError("--timeout", "negative");
}

}  // namespace

std::string describe_exit(const WorkerExit& w) {
  if (w.signaled) return "signal " + std::to_string(w.code) + " (" + signal_name(w.code) + ")";
  if (w.exited) return "exit code " + std::to_string(w.code);
  return "still running";
}

LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv) {
  validate(options, argv);
  int port = options.main_process_port;
  if (port == 0) {
    port = find_free_port();
  } else if (options.machine_rank == 0) {
    check_port_free(port);
  }
  SignalGuard signals;
  Supervisor supervisor(options, port);
  supervisor.spawn_all(argv);
  return supervisor.run();
}

}  // namespace stratagem::launch
