#include "engine/comm/gloo_communicator.hpp"

#include <unistd.h>

#include <ATen/ATen.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <thread>

#include "engine/comm/async_work.hpp"
#include "engine/comm/comm_checks.hpp"
#include "engine/comm/comm_progress.hpp"
#include "engine/comm/gloo_context.hpp"
#include "engine/comm/gloo_reduce_scatter.hpp"
#include "engine/comm/store.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {
namespace {

using Ms = std::chrono::milliseconds;
using ContextPtr = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

void check_reducible(at::ScalarType t, const std::string& op) {
  dispatch_reducible(t, op, []<typename T>() {});
}

void check_cpu(const at::Tensor& t, const std::string& op) {
  if (!t.device().is_cpu()) throw RuntimeError(op + ": the Gloo backend needs CPU tensors");
}

// The ring reads every chunk of `input` but this rank's after writing `output`: an output that
// overlaps the input is allowed only as this rank's own chunk (NCCL's in-place form).
void check_in_place_shard(const at::Tensor& output, const at::Tensor& input, int index) {
  const auto* in = static_cast<const char*>(input.data_ptr());
  const auto* out = static_cast<const char*>(output.data_ptr());
  const auto in_bytes = static_cast<std::ptrdiff_t>(tensor_bytes(input));
  const auto out_bytes = static_cast<std::ptrdiff_t>(tensor_bytes(output));
  const bool overlap = out < in + in_bytes && in < out + out_bytes;
  if (overlap && out != in + static_cast<std::ptrdiff_t>(index) * out_bytes) {
    throw RuntimeError("reduce_scatter: output overlaps input; in place, output must be this "
                       "rank's chunk of input (chunk " + std::to_string(index) + ")");
  }
}

// A posted send/recv and the thread waiting for it to complete.
struct P2PWait {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool is_send = false;
  std::atomic<bool> done{false};
  std::thread thread;
};

// Everything the worker thread touches. Shared with that thread, so that a communicator
// destroyed while a collective hangs (an error path) can leave the thread behind to finish on
// gloo's own timeout instead of holding up the process's exit.
class GlooCore final : public Communicator, public std::enable_shared_from_this<GlooCore> {
 public:
  GlooCore(std::shared_ptr<Store> store, int rank, int world, GlooOptions o)
      : job_store_(std::move(store)),
        store_(job_store_->connect_client()),
        rank_(rank),
        world_(world),
        o_(std::move(o)) {
    if (world_ < 1 || rank_ < 0 || rank_ >= world_) {
      throw RuntimeError("gloo: rank " + std::to_string(rank_) + " outside world of " +
                         std::to_string(world_));
    }
    progress_ =
        std::make_unique<ProgressBoard>(store_->connect_client()->with_prefix(o_.prefix), rank_);
    device_ = open_gloo_device(o_.hostname, o_.iface);
    std::vector<int> all(static_cast<std::size_t>(world_));
    for (int r = 0; r < world_; ++r) all[static_cast<std::size_t>(r)] = r;
    world_key_ = group_key(all);
    if (world_ > 1) {
      contexts_[world_key_] = connect(all, "world");
      p2p_ = connect(all, "p2p");
    }
  }

  void request_stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

  /// After request_stop(): true once the worker loop has returned.
  bool wait_worker_exit(Ms limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return worker_exited_; });
  }

  /// Aborts the pending send/recv waits and joins their threads.
  void abort_p2p() {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    for (auto& w : p2p_waits_) {
      if (!w->done) {
        if (w->is_send) {
          w->buffer->abortWaitSend();
        } else {
          w->buffer->abortWaitRecv();
        }
      }
      w->thread.join();
    }
    p2p_waits_.clear();
  }

  void worker_loop() {
    while (true) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) {
          worker_exited_ = true;
          cv_.notify_all();
          return;
        }
        op = std::move(queue_.front());
        queue_.pop_front();
        if (stop_) {
          lock.unlock();
          op.work->fail(op.text + " cancelled: the communicator was destroyed first");
          continue;
        }
      }
      run(op);
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "gloo"; }
  Ms timeout() const override { return o_.timeout; }

  WorkPtr all_reduce(at::Tensor tensor, const GroupSpec& group, ReduceOp op) override {
    const auto g = resolve_group(group, world_, rank_, "all_reduce");
    check_tensor(tensor, "all_reduce", "tensor");
    check_cpu(tensor, "all_reduce");
    check_reducible(tensor.scalar_type(), "all_reduce");
    return enqueue(
        "all_reduce", g, tensor, [this, tensor, op](const ContextPtr& ctx, uint32_t tag) {
          if (!ctx) return;
          dispatch_reducible(tensor.scalar_type(), "all_reduce", [&]<typename T>() {
            gloo::AllreduceOptions opts(ctx);
            opts.setOutput<T>(static_cast<T*>(tensor.data_ptr()),
                              static_cast<size_t>(tensor.numel()));
            opts.setReduceFunction(op == ReduceOp::sum ? static_cast<ReduceFn>(&gloo::sum<T>)
                                                       : static_cast<ReduceFn>(&gloo::max<T>));
            opts.setTag(tag);
            opts.setTimeout(o_.timeout);
            gloo::allreduce(opts);
          });
        });
  }

  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "reduce_scatter");
    check_tensor(output, "reduce_scatter", "output");
    check_tensor(input, "reduce_scatter", "input");
    check_cpu(input, "reduce_scatter");
    check_cpu(output, "reduce_scatter");
    check_reducible(input.scalar_type(), "reduce_scatter");
    const auto n = static_cast<int64_t>(g.size());
    if (input.numel() != output.numel() * n || input.scalar_type() != output.scalar_type()) {
      throw RuntimeError("reduce_scatter: input must hold group size (" + std::to_string(n) +
                         ") x output elements of the same dtype");
    }
    check_in_place_shard(output, input, index_in(g, rank_));
    return enqueue("reduce_scatter", g, input,
                   [this, output, input](const ContextPtr& ctx, uint32_t tag) {
                     if (!ctx) {
                       output.copy_(input.view_as(output));
                       return;
                     }
                     dispatch_reducible(input.scalar_type(), "reduce_scatter", [&]<typename T>() {
                       ring_reduce_scatter(ctx, input.data_ptr(), output.data_ptr(),
                                           static_cast<std::size_t>(output.numel()), sizeof(T),
                                           &gloo::sum<T>, tag, o_.timeout, rs_workspace_);
                     });
                   });
  }

  WorkPtr all_gather(at::Tensor output, at::Tensor input, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "all_gather");
    check_tensor(output, "all_gather", "output");
    check_tensor(input, "all_gather", "input");
    check_cpu(input, "all_gather");
    check_cpu(output, "all_gather");
    if (output.numel() != input.numel() * static_cast<int64_t>(g.size()) ||
        input.scalar_type() != output.scalar_type()) {
      throw RuntimeError("all_gather: output must hold group size (" + std::to_string(g.size()) +
                         ") x input elements of the same dtype");
    }
    return enqueue(
        "all_gather", g, input, [this, output, input](const ContextPtr& ctx, uint32_t tag) {
          if (!ctx) {
            output.view(-1).copy_(input.view(-1));
            return;
          }
          gloo::AllgatherOptions opts(ctx);
          opts.setInput<uint8_t>(static_cast<uint8_t*>(input.data_ptr()), tensor_bytes(input));
          opts.setOutput<uint8_t>(static_cast<uint8_t*>(output.data_ptr()), tensor_bytes(output));
          opts.setTag(tag);
          opts.setTimeout(o_.timeout);
          gloo::allgather(opts);
        });
  }

  WorkPtr broadcast(at::Tensor tensor, int root, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "broadcast");
    check_tensor(tensor, "broadcast", "tensor");
    check_cpu(tensor, "broadcast");
    const int root_index = index_in(g, root);
    if (root_index < 0) {
      throw RuntimeError("broadcast: root " + std::to_string(root) + " is not in group " +
                         group_text(g));
    }
    return enqueue(
        "broadcast", g, tensor, [this, tensor, root_index](const ContextPtr& ctx, uint32_t tag) {
          if (!ctx) return;
          gloo::BroadcastOptions opts(ctx);
          opts.setOutput<uint8_t>(static_cast<uint8_t*>(tensor.data_ptr()), tensor_bytes(tensor));
          opts.setRoot(root_index);
          opts.setTag(tag);
          opts.setTimeout(o_.timeout);
          gloo::broadcast(opts);
        });
  }

  WorkPtr send(at::Tensor tensor, int peer, std::uint32_t tag) override {
    return post_p2p(true, std::move(tensor), peer, tag);
  }

  WorkPtr recv(at::Tensor tensor, int peer, std::uint32_t tag) override {
    return post_p2p(false, std::move(tensor), peer, tag);
  }

  void barrier(const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "barrier");
    enqueue("barrier", g, at::Tensor(), [this](const ContextPtr& ctx, uint32_t tag) {
      if (!ctx) return;
      gloo::BarrierOptions opts(ctx);
      opts.setTag(tag);
      opts.setTimeout(o_.timeout);
      gloo::barrier(opts);
    })->wait();
  }

 private:
  using Body = std::function<void(const ContextPtr&, uint32_t)>;
  struct Op {
    std::string name;
    std::vector<int> group;
    std::uint64_t seq = 0;
    std::string text;
    Body body;
    std::shared_ptr<AsyncWork> work;
  };

  ContextPtr connect(const std::vector<int>& group, const std::string& name) {
    return connect_gloo_context(
        store_, o_.prefix + name + "/", group, rank_, o_.timeout, device_,
        "gloo " + name + " group " + group_text(group) + " on rank " + std::to_string(rank_));
  }

  // On the worker thread only: subgroup contexts are connected on first use, in the order the
  // members issue their collectives, so they all get there.
  ContextPtr context_for(const std::vector<int>& group) {
    if (group.size() == 1) return nullptr;
    const std::string key = group_key(group);
    auto& ctx = contexts_[key];
    if (!ctx) ctx = connect(group, "group/" + key);
    return ctx;
  }

  WorkPtr enqueue(const std::string& name, const std::vector<int>& group, const at::Tensor& t,
                  Body body) {
    // Numbered and queued under one lock: with several issuing threads the worker must run
    // the ops in the order their sequence numbers say.
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) throw RuntimeError("gloo " + name + ": the communicator is shutting down");
    Op op;
    op.name = name;
    op.group = group;
    op.seq = progress_->issue(name, group);
    op.text = "gloo " + op_text(name, op.seq, group, t);
    op.body = std::move(body);
    op.work = std::make_shared<AsyncWork>(
        op.text, rank_, o_.timeout, [self = weak_from_this(), group, seq = op.seq, name] {
          auto core = self.lock();
          return core ? core->progress_->diagnose(group, seq, name) : std::string();
        });
    auto work = op.work;
    queue_.push_back(std::move(op));
    lock.unlock();
    cv_.notify_one();
    return work;
  }

  void run(Op& op) {
    const std::string key = group_key(op.group);
    progress_->set_running(OpRef{op.name, key, op.seq});
    try {
      ContextPtr ctx = context_for(op.group);
      op.body(ctx, tags_[key]++);
      progress_->set_running(std::nullopt);
      op.work->complete();
    } catch (const std::exception& e) {
      std::string msg = op.text + " failed on rank " + std::to_string(rank_) + ": " + e.what();
      const std::string laggards = progress_->diagnose(op.group, op.seq, op.name);
      if (!laggards.empty()) msg += "; " + laggards;
      progress_->set_failed(op.text + ": " + e.what());
      op.work->fail(msg);
    }
  }

  WorkPtr post_p2p(bool is_send, at::Tensor t, int peer, std::uint32_t tag) {
    const std::string name = is_send ? "send" : "recv";
    check_tensor(t, name, "tensor");
    check_cpu(t, name);
    if (peer < 0 || peer >= world_ || peer == rank_) {
      throw RuntimeError(name + ": invalid peer " + std::to_string(peer) + " for rank " +
                         std::to_string(rank_) + " of " + std::to_string(world_));
    }
    const std::string what = std::string(is_send ? "send to" : "recv from") + " rank " +
                             std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
    const std::string text = "gloo " + what + " (" + std::to_string(tensor_bytes(t)) + " B)";
    progress_->note_p2p(what);
    auto work =
        std::make_shared<AsyncWork>(text, rank_, o_.timeout, [self = weak_from_this(), peer] {
          auto core = self.lock();
          return core ? core->progress_->diagnose_peer(peer) : std::string();
        });
    auto wait = std::make_unique<P2PWait>();
    wait->is_send = is_send;
    wait->buffer = p2p_->createUnboundBuffer(t.data_ptr(), tensor_bytes(t));
    if (is_send) {
      wait->buffer->send(peer, tag);
    } else {
      wait->buffer->recv(peer, tag);
    }
    P2PWait* raw = wait.get();
    wait->thread = std::thread([this, raw, work, t, text, peer] {
      try {
        const bool ok =
            raw->is_send ? raw->buffer->waitSend(o_.timeout) : raw->buffer->waitRecv(o_.timeout);
        if (ok) {
          work->complete();
        } else {
          work->fail(text + " aborted: the communicator was destroyed first");
        }
      } catch (const std::exception& e) {
        work->fail(text + " failed on rank " + std::to_string(rank_) + ": " + e.what() + "; " +
                   progress_->diagnose_peer(peer));
      }
      raw->done = true;
    });
    std::lock_guard<std::mutex> lock(p2p_mu_);
    // Reap waiters that finished, so long runs do not accumulate threads.
    for (auto it = p2p_waits_.begin(); it != p2p_waits_.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        it = p2p_waits_.erase(it);
      } else {
        ++it;
      }
    }
    p2p_waits_.push_back(std::move(wait));
    return work;
  }

  // The caller's store (rank 0's hosts the server: kept alive with us) and our own connection
  // to it, so our blocking waits never hold up the caller's use of theirs.
  std::shared_ptr<Store> job_store_;
  std::shared_ptr<Store> store_;
  int rank_;
  int world_;
  GlooOptions o_;
  std::unique_ptr<ProgressBoard> progress_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::string world_key_;
  ContextPtr p2p_;
  std::map<std::string, ContextPtr> contexts_;  // worker thread only (after construction)
  std::map<std::string, uint32_t> tags_;        // worker thread only
  std::vector<char> rs_workspace_;              // worker thread only: reduce-scatter's buffers
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  bool worker_exited_ = false;
  std::mutex p2p_mu_;
  std::list<std::unique_ptr<P2PWait>> p2p_waits_;
};

// How long a destroyed communicator waits for an op still running before leaving it to its
// worker thread: long enough for an op that is about to finish.
constexpr Ms kDetachAfter{1000};

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(std::shared_ptr<GlooCore> core) : core_(std::move(core)) {
    worker_ = std::thread([core = core_] { core->worker_loop(); });
  }

  ~GlooCommunicator() override {
    core_->request_stop();
    if (core_->wait_worker_exit(kDetachAfter)) {
      worker_.join();
    } else {
      worker_.detach();  // it owns a reference to the core and ends on gloo's timeout
    }
    core_->abort_p2p();
  }

  int rank() const override { return core_->rank(); }
  int world_size() const override { return core_->world_size(); }
  std::string backend() const override { return core_->backend(); }
  Ms timeout() const override { return core_->timeout(); }
  WorkPtr all_reduce(at::Tensor t, const GroupSpec& g, ReduceOp op) override {
    return core_->all_reduce(std::move(t), g, op);
  }
  WorkPtr reduce_scatter(at::Tensor out, at::Tensor in, const GroupSpec& g) override {
    return core_->reduce_scatter(std::move(out), std::move(in), g);
  }
  WorkPtr all_gather(at::Tensor out, at::Tensor in, const GroupSpec& g) override {
    return core_->all_gather(std::move(out), std::move(in), g);
  }
  WorkPtr broadcast(at::Tensor t, int root, const GroupSpec& g) override {
    return core_->broadcast(std::move(t), root, g);
  }
  WorkPtr send(at::Tensor t, int peer, std::uint32_t tag) override {
    return core_->send(std::move(t), peer, tag);
  }
  WorkPtr recv(at::Tensor t, int peer, std::uint32_t tag) override {
    return core_->recv(std::move(t), peer, tag);
  }
  void barrier(const GroupSpec& g) override { core_->barrier(g); }

 private:
  std::shared_ptr<GlooCore> core_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<Store> store, int rank,
                                                     int world_size, const GlooOptions& options) {
  return std::make_unique<GlooCommunicator>(
      std::make_shared<GlooCore>(std::move(store), rank, world_size, options));
}

GlooOptions gloo_options_for(const launch::DistEnv& env, std::chrono::milliseconds timeout) {
  GlooOptions o;
  o.timeout = timeout;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    o.iface = iface;
  } else if (env.local_world_size == env.world_size) {
    o.hostname = "127.0.0.1";
  } else {
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    o.hostname = host;
  }
  return o;
}

}  // namespace stratagem::comm
