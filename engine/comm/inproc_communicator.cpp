#include "engine/comm/inproc_communicator.hpp"

#include <ATen/ATen.h>

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "engine/comm/async_work.hpp"
#include "engine/comm/comm_checks.hpp"
#include "engine/comm/comm_progress.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {

namespace {

struct Contribution {
  at::Tensor out;  ///< written by the collective (in place for all_reduce and broadcast)
  at::Tensor in;   ///< read by reduce_scatter and all_gather
};

// One collective on one group: filled as members arrive, computed by the last one.
struct Round {
  std::string op;
  std::string first_text;  ///< description from the first arriver, for mismatch errors
  int first_rank = -1;
  std::vector<int> group;
  std::uint64_t seq = 0;
  ReduceOp reduce = ReduceOp::sum;
  int root_index = 0;
  std::vector<std::optional<Contribution>> slots;
  std::vector<std::shared_ptr<AsyncWork>> works;
  int arrived = 0;
  std::string error;
};

struct Transfer {
  at::Tensor tensor;
  std::shared_ptr<AsyncWork> work;
};

using P2PKey = std::tuple<int, int, std::uint32_t>;  // src, dst, tag

}  // namespace

class InprocWorld : public std::enable_shared_from_this<InprocWorld> {
 public:
  InprocWorld(int n, std::chrono::milliseconds timeout)
      : n_(n),
        timeout_(timeout),
        progress_(static_cast<std::size_t>(n)),
        failed_(static_cast<std::size_t>(n)) {}

  int size() const { return n_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  std::shared_ptr<AsyncWork> collective(int rank, const std::string& op,
                                        const std::vector<int>& group, Contribution c,
                                        ReduceOp reduce, int root_index) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = group_key(group);
    auto& state = groups_[key];
    const std::uint64_t seq = state.next_seq[rank]++;
    auto& prog = progress_[static_cast<std::size_t>(rank)];
    prog.issued[key] = seq + 1;
    prog.last_issued = OpRef{op, key, seq};

    auto& round_ptr = state.rounds[seq];
    if (!round_ptr) {
      round_ptr = std::make_shared<Round>();
      round_ptr->op = op;
      round_ptr->group = group;
      round_ptr->seq = seq;
      round_ptr->reduce = reduce;
      round_ptr->root_index = root_index;
      round_ptr->first_rank = rank;
      round_ptr->first_text = op_text(op, seq, group, c.in.defined() ? c.in : c.out);
      round_ptr->slots.resize(group.size());
      round_ptr->works.resize(group.size());
    }
    auto round = round_ptr;
    const std::string text = op_text(op, seq, group, c.in.defined() ? c.in : c.out);
    const int idx = index_in(group, rank);
    std::weak_ptr<Round> weak_round = round;
    auto work = std::make_shared<AsyncWork>(text, rank, timeout_,
                                            [world = weak_from_this(), weak_round, rank] {
                                              auto w = world.lock();
                                              auto r = weak_round.lock();
                                              return w && r ? w->laggards(*r, rank) : std::string();
                                            });
    round->slots[static_cast<std::size_t>(idx)] = std::move(c);
    round->works[static_cast<std::size_t>(idx)] = work;
    ++round->arrived;

    if (round->error.empty() &&
        (round->op != op || round->reduce != reduce || round->root_index != root_index)) {
      fail_round(*round, "collective mismatch at #" + std::to_string(seq) + " on " +
                             group_text(group) + ": rank " + std::to_string(round->first_rank) +
                             " issued " + round->first_text + ", rank " + std::to_string(rank) +
                             " issued " + text);
    }
    for (int m : group) {
      if (round->error.empty() && !failed_[static_cast<std::size_t>(m)].empty()) {
        fail_round(*round, text + " failed: rank " + std::to_string(m) +
                               " failed: " + failed_[static_cast<std::size_t>(m)]);
      }
    }
    if (!round->error.empty()) {
      work->fail(round->error);
    } else if (round->arrived == static_cast<int>(group.size())) {
      try {
        compute(*round);
        for (auto& w : round->works) w->complete();
      } catch (const std::exception& e) {
        fail_round(*round, text + " failed: " + e.what());
      }
    }
    if (round->arrived == static_cast<int>(group.size())) state.rounds.erase(seq);
    return work;
  }

  std::shared_ptr<AsyncWork> p2p(int rank, bool is_send, at::Tensor t, int peer,
                                 std::uint32_t tag) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string text = std::string(is_send ? "send to " : "recv from ") + "rank " +
                             std::to_string(peer) + " (tag " + std::to_string(tag) + ", " +
                             std::to_string(tensor_bytes(t)) + " B)";
    auto work = std::make_shared<AsyncWork>(
        text, rank, timeout_, [world = weak_from_this(), peer, is_send] {
          auto w = world.lock();
          if (!w) return std::string();
          std::lock_guard<std::mutex> l(w->mu_);
          const auto& p = w->progress_[static_cast<std::size_t>(peer)];
          std::string s = "rank " + std::to_string(peer) + " has not posted the matching " +
                          (is_send ? "recv" : "send");
          if (p.last_issued) s += " (its last collective: " + describe(*p.last_issued) + ")";
          return s;
        });
    for (int r : {rank, peer}) {
      if (!failed_[static_cast<std::size_t>(r)].empty()) {
        work->fail(text + " failed: rank " + std::to_string(r) +
                   " failed: " + failed_[static_cast<std::size_t>(r)]);
        return work;
      }
    }
    const P2PKey key = is_send ? P2PKey{rank, peer, tag} : P2PKey{peer, rank, tag};
    auto& mine = is_send ? sends_[key] : recvs_[key];
    auto& theirs = is_send ? recvs_[key] : sends_[key];
    if (theirs.empty()) {
      mine.push_back({t, work});
      return work;
    }
    Transfer other = theirs.front();
    theirs.pop_front();
    const at::Tensor& src = is_send ? t : other.tensor;
    at::Tensor dst = is_send ? other.tensor : t;
    if (src.scalar_type() != dst.scalar_type() || src.numel() != dst.numel()) {
      const std::string why = "send/recv mismatch (tag " + std::to_string(tag) + "): sent " +
                              std::to_string(src.numel()) + " " + c10::toString(src.scalar_type()) +
                              ", receive buffer " + std::to_string(dst.numel()) + " " +
                              c10::toString(dst.scalar_type());
      work->fail(text + " failed: " + why);
      other.work->fail(other.work->what() + " failed: " + why);
      return work;
    }
    dst.view(-1).copy_(src.view(-1));
    work->complete();
    other.work->complete();
    return work;
  }

  void fail(int rank, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_[static_cast<std::size_t>(rank)] = why;
    progress_[static_cast<std::size_t>(rank)].failed = why;
    const std::string cause = "rank " + std::to_string(rank) + " failed: " + why;
    for (auto& [key, state] : groups_) {
      for (auto& [seq, round] : state.rounds) {
        if (index_in(round->group, rank) >= 0 && round->error.empty()) {
          fail_round(*round,
                     op_text(round->op, seq, round->group, at::Tensor()) + " failed: " + cause);
        }
      }
    }
    for (auto* box : {&sends_, &recvs_}) {
      for (auto& [key, queue] : *box) {
        if (std::get<0>(key) != rank && std::get<1>(key) != rank) continue;
        for (auto& tr : queue) tr.work->fail(tr.work->what() + " failed: " + cause);
        queue.clear();
      }
    }
  }

 private:
  struct GroupState {
    std::map<std::uint64_t, std::shared_ptr<Round>> rounds;
    std::map<int, std::uint64_t> next_seq;
  };

  // Under mu_.
  void fail_round(Round& round, const std::string& why) {
    round.error = why;
    for (auto& w : round.works) {
      if (w) w->fail(why);
    }
  }

  std::string laggards(const Round& round, int self) {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int, std::optional<RankProgress>> records;
    for (int r : round.group) records[r] = progress_[static_cast<std::size_t>(r)];
    return describe_laggards(round.group, round.seq, round.op, self, records);
  }

  // Under mu_: every member has arrived.
  static void compute(Round& round) {
    const auto n = static_cast<int64_t>(round.group.size());
    auto slot = [&](std::size_t i) -> Contribution& { return *round.slots[i]; };
    auto check_same = [&](const at::Tensor& a, const at::Tensor& b, std::size_t i) {
      if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel()) {
        throw RuntimeError("rank " + std::to_string(round.group[i]) + " passed " +
                           std::to_string(b.numel()) + " " + c10::toString(b.scalar_type()) +
                           ", rank " + std::to_string(round.group[0]) + " passed " +
                           std::to_string(a.numel()) + " " + c10::toString(a.scalar_type()));
      }
    };
    if (round.op == "barrier") return;
    if (round.op == "all_reduce") {
      at::Tensor acc = slot(0).out.clone();
      for (std::size_t i = 1; i < round.slots.size(); ++i) {
        check_same(acc, slot(i).out, i);
        if (round.reduce == ReduceOp::sum) {
          acc.add_(slot(i).out);
        } else {
          acc = at::maximum(acc, slot(i).out);
        }
      }
      for (std::size_t i = 0; i < round.slots.size(); ++i) slot(i).out.copy_(acc);
    } else if (round.op == "reduce_scatter") {
      at::Tensor acc = slot(0).in.reshape({-1}).clone();
      for (std::size_t i = 1; i < round.slots.size(); ++i) {
        check_same(slot(0).in, slot(i).in, i);
        acc.add_(slot(i).in.reshape({-1}));
      }
      const int64_t k = acc.numel() / n;
      for (std::size_t i = 0; i < round.slots.size(); ++i) {
        slot(i).out.view(-1).copy_(acc.narrow(0, static_cast<int64_t>(i) * k, k));
      }
    } else if (round.op == "all_gather") {
      std::vector<at::Tensor> parts;
      for (std::size_t i = 0; i < round.slots.size(); ++i) {
        check_same(slot(0).in, slot(i).in, i);
        parts.push_back(slot(i).in.reshape({-1}));
      }
      const at::Tensor all = at::cat(parts);
      for (std::size_t i = 0; i < round.slots.size(); ++i) slot(i).out.view(-1).copy_(all);
    } else if (round.op == "broadcast") {
      const auto root = static_cast<std::size_t>(round.root_index);
      for (std::size_t i = 0; i < round.slots.size(); ++i) {
        check_same(slot(root).out, slot(i).out, i);
        if (i != root) slot(i).out.copy_(slot(root).out);
      }
    }
  }

  std::mutex mu_;
  int n_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, GroupState> groups_;
  std::vector<RankProgress> progress_;
  std::vector<std::string> failed_;
  std::map<P2PKey, std::deque<Transfer>> sends_;
  std::map<P2PKey, std::deque<Transfer>> recvs_;
};

InprocCommunicator::InprocCommunicator(std::shared_ptr<InprocWorld> world, int rank)
    : world_(std::move(world)), rank_(rank) {}

int InprocCommunicator::world_size() const {
  return world_->size();
}

std::chrono::milliseconds InprocCommunicator::timeout() const {
  return world_->timeout();
}

WorkPtr InprocCommunicator::all_reduce(at::Tensor tensor, const GroupSpec& group, ReduceOp op) {
  const auto g = resolve_group(group, world_size(), rank_, "all_reduce");
  check_tensor(tensor, "all_reduce", "tensor");
  return world_->collective(rank_, "all_reduce", g, {tensor, at::Tensor()}, op, 0);
}

WorkPtr InprocCommunicator::reduce_scatter(at::Tensor output, at::Tensor input,
                                           const GroupSpec& group) {
  const auto g = resolve_group(group, world_size(), rank_, "reduce_scatter");
  check_tensor(output, "reduce_scatter", "output");
  check_tensor(input, "reduce_scatter", "input");
  if (input.numel() != output.numel() * static_cast<int64_t>(g.size()) ||
      input.scalar_type() != output.scalar_type()) {
    throw RuntimeError("reduce_scatter: input must hold group size (" + std::to_string(g.size()) +
                       ") x output elements of the same dtype");
  }
  return world_->collective(rank_, "reduce_scatter", g, {output, input}, ReduceOp::sum, 0);
}

WorkPtr InprocCommunicator::all_gather(at::Tensor output, at::Tensor input,
                                       const GroupSpec& group) {
  const auto g = resolve_group(group, world_size(), rank_, "all_gather");
  check_tensor(output, "all_gather", "output");
  check_tensor(input, "all_gather", "input");
  if (output.numel() != input.numel() * static_cast<int64_t>(g.size()) ||
      input.scalar_type() != output.scalar_type()) {
    throw RuntimeError("all_gather: output must hold group size (" + std::to_string(g.size()) +
                       ") x input elements of the same dtype");
  }
  return world_->collective(rank_, "all_gather", g, {output, input}, ReduceOp::sum, 0);
}

WorkPtr InprocCommunicator::broadcast(at::Tensor tensor, int root, const GroupSpec& group) {
  const auto g = resolve_group(group, world_size(), rank_, "broadcast");
  check_tensor(tensor, "broadcast", "tensor");
  const int root_index = index_in(g, root);
  if (root_index < 0) {
    throw RuntimeError("broadcast: root " + std::to_string(root) + " is not in group " +
                       group_text(g));
  }
  return world_->collective(rank_, "broadcast", g, {tensor, at::Tensor()}, ReduceOp::sum,
                            root_index);
}

WorkPtr InprocCommunicator::send(at::Tensor tensor, int peer, std::uint32_t tag) {
  check_tensor(tensor, "send", "tensor");
  if (peer < 0 || peer >= world_size() || peer == rank_) {
    throw RuntimeError("send: invalid peer " + std::to_string(peer));
  }
  return world_->p2p(rank_, true, tensor, peer, tag);
}

WorkPtr InprocCommunicator::recv(at::Tensor tensor, int peer, std::uint32_t tag) {
  check_tensor(tensor, "recv", "tensor");
  if (peer < 0 || peer >= world_size() || peer == rank_) {
    throw RuntimeError("recv: invalid peer " + std::to_string(peer));
  }
  return world_->p2p(rank_, false, tensor, peer, tag);
}

void InprocCommunicator::barrier(const GroupSpec& group) {
  const auto g = resolve_group(group, world_size(), rank_, "barrier");
  world_->collective(rank_, "barrier", g, {}, ReduceOp::sum, 0)->wait();
}

void InprocCommunicator::fail(const std::string& why) {
  world_->fail(rank_, why);
}

std::vector<std::unique_ptr<Communicator>> make_inproc_world(int n,
                                                             std::chrono::milliseconds timeout) {
  if (n < 1) throw RuntimeError("make_inproc_world: need at least one rank");
  auto world = std::make_shared<InprocWorld>(n, timeout);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<InprocCommunicator>(world, r));
  return out;
}

}  // namespace stratagem::comm
