#include "engine/comm/comm_progress.hpp"

#include <future>
#include <sstream>
#include <thread>

#include "engine/comm/store.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {
namespace {

// One record per line: "issued <group> <n>", "last <op> <group> <seq>", "running <op> <group>
// <seq>", "failed <text>". Group keys and op names contain no spaces.
void write_op(std::ostringstream& s, const char* tag, const OpRef& op) {
  s << tag << ' ' << op.op << ' ' << op.group << ' ' << op.seq << '\n';
}

std::optional<OpRef> read_op(std::istringstream& line) {
  OpRef op;
  if (line >> op.op >> op.group >> op.seq) return op;
  return std::nullopt;
}

std::string rank_progress_key(int rank) {
  return "progress/" + std::to_string(rank);
}

}  // namespace

std::string group_key(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s << (i ? "," : "") << ranks[i];
  return s.str();
}

std::string group_text(const std::vector<int>& ranks) {
  std::string s = group_key(ranks);
  s.insert(s.begin(), '[');
  s.push_back(']');
  return s;
}

std::string describe(const OpRef& op) {
  return op.op + " #" + std::to_string(op.seq) + " on [" + op.group + "]";
}

std::string RankProgress::serialize() const {
  std::ostringstream s;
  for (const auto& [g, n] : issued) s << "issued " << g << ' ' << n << '\n';
  if (last_issued) write_op(s, "last", *last_issued);
  if (running) write_op(s, "running", *running);
  if (!last_p2p.empty()) s << "p2p " << last_p2p << '\n';
  if (!failed.empty()) s << "failed " << failed << '\n';
  return s.str();
}

RankProgress RankProgress::parse(const std::string& text) {
  RankProgress p;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    std::istringstream line(raw);
    std::string tag;
    line >> tag;
    if (tag == "issued") {
      std::string g;
      std::uint64_t n = 0;
      if (line >> g >> n) p.issued[g] = n;
    } else if (tag == "last") {
      p.last_issued = read_op(line);
    } else if (tag == "running") {
      p.running = read_op(line);
    } else if (tag == "p2p") {
      std::getline(line >> std::ws, p.last_p2p);
    } else if (tag == "failed") {
      std::getline(line >> std::ws, p.failed);
    }
  }
  return p;
}

std::string describe_laggards(const std::vector<int>& group, std::uint64_t seq,
                              const std::string& op, int self,
                              const std::map<int, std::optional<RankProgress>>& records) {
  const std::string key = group_key(group);
  std::ostringstream s;
  auto sep = [&] {
    if (s.tellp() > 0) s << "; ";
  };
  for (int r : group) {
    if (r == self) continue;
    const auto it = records.find(r);
    if (it == records.end() || !it->second) {
      sep();
      s << "rank " << r << " has published no progress (not started, or unreachable)";
      continue;
    }
    const RankProgress& p = *it->second;
    const auto issued = p.issued.count(key) ? p.issued.at(key) : 0;
    if (!p.failed.empty()) {
      sep();
      s << "rank " << r << " failed: " << p.failed;
    } else if (issued <= seq) {
      sep();
      s << "rank " << r << " has not reached it (";
      if (p.last_issued) {
        s << "last issued: " << describe(*p.last_issued);
      } else {
        s << "issued no collective yet";
      }
      if (p.running) s << ", executing " << describe(*p.running);
      s << ")";
    } else if (p.running && p.running->group == key && p.running->seq == seq &&
               p.running->op != op) {
      sep();
      s << "rank " << r << " is executing " << describe(*p.running) << " where this rank has " << op
        << ": the ranks issued different collectives";
    } else if (p.running && !(p.running->group == key && p.running->seq == seq)) {
      sep();
      s << "rank " << r << " issued it but is still executing " << describe(*p.running);
    }
  }
  return s.str();
}

std::string describe_peer(int rank, const std::optional<RankProgress>& record) {
  std::string s = "rank " + std::to_string(rank);
  if (!record) return s + " has published no progress (not started, or unreachable)";
  if (!record->failed.empty()) return s + " failed: " + record->failed;
  s += record->last_issued ? ": last issued " + describe(*record->last_issued)
                           : ": issued no collective yet";
  if (record->running) s += ", executing " + describe(*record->running);
  if (!record->last_p2p.empty()) s += ", last posted " + record->last_p2p;
  return s;
}

ProgressBoard::ProgressBoard(std::shared_ptr<Store> store, int rank,
                             std::chrono::milliseconds period)
    : store_(std::move(store)), rank_(rank), period_(period) {
  publisher_ = std::thread([this] { publish_loop(); });
}

ProgressBoard::~ProgressBoard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  publisher_.join();
}

std::uint64_t ProgressBoard::issue(const std::string& op, const std::vector<int>& group) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = group_key(group);
  const std::uint64_t seq = mine_.issued[key]++;
  mine_.last_issued = OpRef{op, key, seq};
  ++version_;
  return seq;
}

void ProgressBoard::set_running(std::optional<OpRef> op) {
  std::lock_guard<std::mutex> lock(mu_);
  mine_.running = std::move(op);
  ++version_;
}

void ProgressBoard::set_failed(const std::string& why) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!mine_.failed.empty()) return;
    // One line: the record format is line-based.
    mine_.failed = why.substr(0, why.find('\n'));
    ++version_;
    text = mine_.serialize();
  }
  // Published at once: the other ranks are about to ask.
  try {
    // A diagnosis stuck on a stopped store holds the lock: publish without waiting for it.
    std::unique_lock<std::timed_mutex> lock(*store_mu_, kDiagnoseLimit);
    if (lock) store_->set(rank_progress_key(rank_), text);
  } catch (const std::exception&) {
    // The store may be gone with rank 0; the failure is reported locally anyway.
  }
}

void ProgressBoard::note_p2p(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  mine_.last_p2p = what;
  ++version_;
}

void ProgressBoard::publish_loop() {
  std::uint64_t published = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (version_ != published) {
      const std::string text = mine_.serialize();
      published = version_;
      lock.unlock();
      try {
        std::unique_lock<std::timed_mutex> store_lock(*store_mu_, period_);
        if (store_lock) store_->set(rank_progress_key(rank_), text);
      } catch (const std::exception&) {
        // At shutdown rank 0 may already have closed the store; progress is advisory.
      }
      lock.lock();
    }
    cv_.wait_for(lock, period_, [this] { return stop_; });
  }
}

std::string ProgressBoard::diagnose(const std::vector<int>& group, std::uint64_t seq,
                                    const std::string& op) {
  std::vector<int> others;
  for (int r : group) {
    if (r != rank_) others.push_back(r);
  }
  try {
    return describe_laggards(group, seq, op, rank_, fetch_bounded(others));
  } catch (const std::exception& e) {
    return std::string("the other ranks' progress is unavailable (") + e.what() + ")";
  }
}

std::string ProgressBoard::diagnose_peer(int rank) {
  try {
    return describe_peer(rank, fetch_bounded({rank}).at(rank));
  } catch (const std::exception& e) {
    return "rank " + std::to_string(rank) + "'s progress is unavailable (" + e.what() + ")";
  }
}

std::map<int, std::optional<RankProgress>> ProgressBoard::fetch_bounded(
    const std::vector<int>& ranks) {
  using Records = std::map<int, std::optional<RankProgress>>;
  auto done = std::make_shared<std::promise<Records>>();
  auto result = done->get_future();
  // The thread owns what it touches (the store, its lock), so it may outlive this board.
  std::thread([done, store = store_, mu = store_mu_, ranks] {
    try {
      Records records;
      std::lock_guard<std::timed_mutex> lock(*mu);
      for (int r : ranks) {
        const std::string key = rank_progress_key(r);
        records[r] = store->check({key}) ? RankProgress::parse(store->get(key))
                                         : std::optional<RankProgress>();
      }
      done->set_value(std::move(records));
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_for(kDiagnoseLimit) != std::future_status::ready) {
    throw RuntimeError("the rendezvous store did not answer within " +
                       std::to_string(kDiagnoseLimit.count()) +
                       " ms; the rank that hosts it (rank 0) may be stopped or gone");
  }
  return result.get();
}

}  // namespace stratagem::comm
