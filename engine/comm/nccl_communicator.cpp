#include "engine/comm/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <ATen/Tensor.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/async_work.hpp"
#include "engine/comm/comm_checks.hpp"
#include "engine/comm/comm_progress.hpp"
#include "engine/comm/store.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {
namespace {

using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw RuntimeError("CUDA: " + what + ": " + cudaGetErrorString(e));
}

void nccl_check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw RuntimeError("NCCL: " + what + ": " + ncclGetErrorString(r));
}

// Makes `device` current for the scope (events and the default stream are per device) and
// restores the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

ncclDataType_t nccl_type(at::ScalarType t, const std::string& op) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kByte:
      return ncclUint8;
    case at::kChar:
      return ncclInt8;
    default:
      throw RuntimeError(op + ": NCCL has no type for dtype " + std::string(c10::toString(t)));
  }
}

// Completion of one op: `enqueued` once the worker (or caller) launched it, then `done_event`
// on the GPU. Holds the tensors until then.
class NcclWork final : public Work {
 public:
  NcclWork(std::string what, int rank, Ms default_timeout, std::function<std::string()> diagnose,
           std::vector<at::Tensor> keep, std::shared_ptr<std::atomic<bool>> aborted)
      : what_(std::move(what)),
        rank_(rank),
        default_timeout_(default_timeout),
        diagnose_(std::move(diagnose)),
        keep_(std::move(keep)),
        aborted_(std::move(aborted)) {}

  ~NcclWork() override {
    if (event_) cudaEventDestroy(event_);
  }

  void launched(cudaEvent_t event, ncclComm_t comm) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      event_ = event;
      comm_ = comm;
      launched_ = true;
    }
    cv_.notify_all();
  }

  void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = why;
      launched_ = true;
    }
    cv_.notify_all();
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!launched_) return false;
    if (!error_.empty() || finished_) return true;
    const cudaError_t q = cudaEventQuery(event_);
    if (q == cudaErrorNotReady) return false;
    finished_ = true;
    if (q != cudaSuccess) error_ = what_ + ": " + cudaGetErrorString(q);
    return true;
  }

  void wait(Ms timeout) override {
    if (timeout.count() <= 0) timeout = default_timeout_;
    const auto deadline = Clock::now() + timeout;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_until(lock, deadline, [this] { return launched_; })) {
        lock.unlock();
        timed_out(timeout);
      }
      if (!error_.empty()) throw RuntimeError(error_);
    }
    // Polled rather than cudaEventSynchronize so that a hung collective times out.
    auto pause = std::chrono::microseconds(20);
    while (!is_completed()) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess) {
        *aborted_ = true;
        throw RuntimeError(what_ + " failed on rank " + std::to_string(rank_) + ": " +
                           ncclGetErrorString(async));
      }
      if (Clock::now() >= deadline) timed_out(timeout);
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) throw RuntimeError(error_);
    keep_.clear();
  }

 private:
  [[noreturn]] void timed_out(Ms timeout) {
    *aborted_ = true;
    std::string msg = what_ + " did not complete within " + duration_text(timeout) + " on rank " +
                      std::to_string(rank_);
    const std::string laggards = diagnose_ ? diagnose_() : std::string();
    if (!laggards.empty()) msg += ": " + laggards;
    throw RuntimeError(msg);
  }

  std::string what_;
  int rank_;
  Ms default_timeout_;
  std::function<std::string()> diagnose_;
  std::vector<at::Tensor> keep_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool launched_ = false;
  bool finished_ = false;
  cudaEvent_t event_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::string error_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<Store> store, int rank, int world, int local_rank, Ms timeout,
                   std::string prefix)
      : job_store_(std::move(store)),
        store_(job_store_->connect_client()),
        rank_(rank),
        world_(world),
        timeout_(timeout),
        prefix_(std::move(prefix)) {
    int count = 0;
    cuda_check(cudaGetDeviceCount(&count), "rank " + std::to_string(rank) + ": cudaGetDeviceCount");
    if (count < 1) throw RuntimeError("nccl: rank " + std::to_string(rank) + " sees no GPU");
    device_ = local_rank % count;
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    progress_ =
        std::make_shared<ProgressBoard>(store_->connect_client()->with_prefix(prefix_), rank_);
    for (cudaStream_t* s : {&coll_stream_, &up_stream_, &down_stream_}) {
      cuda_check(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    cuda_check(cudaMalloc(&barrier_buf_, sizeof(float)), "cudaMalloc");
    std::vector<int> all(static_cast<std::size_t>(world_));
    for (int r = 0; r < world_; ++r) all[static_cast<std::size_t>(r)] = r;
    comms_[group_key(all)] = init_comm(all, "world");
    up_ = init_comm(all, "p2p_up");
    down_ = init_comm(all, "p2p_down");
    worker_ = std::thread([this] { worker_loop(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    cudaSetDevice(device_);
    // A communicator with a failed or timed-out op may never drain: abort instead of waiting.
    auto close = [this](ncclComm_t c) { *aborted_ ? ncclCommAbort(c) : ncclCommDestroy(c); };
    for (auto& [key, c] : comms_) close(c);
    close(up_);
    close(down_);
    cudaFree(barrier_buf_);
    for (cudaStream_t s : {coll_stream_, up_stream_, down_stream_}) cudaStreamDestroy(s);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "nccl"; }
  Ms timeout() const override { return timeout_; }

  WorkPtr all_reduce(at::Tensor t, const GroupSpec& group, ReduceOp op) override {
    const auto g = resolve_group(group, world_, rank_, "all_reduce");
    check(t, "all_reduce");
    const auto type = nccl_type(t.scalar_type(), "all_reduce");
    const ncclRedOp_t red = op == ReduceOp::sum ? ncclSum : ncclMax;
    return enqueue("all_reduce", g, t, {t}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type, red, c,
                           s);
    });
  }

  WorkPtr reduce_scatter(at::Tensor out, at::Tensor in, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "reduce_scatter");
    check(out, "reduce_scatter");
    check(in, "reduce_scatter");
    if (in.numel() != out.numel() * static_cast<int64_t>(g.size()) ||
        in.scalar_type() != out.scalar_type()) {
      throw RuntimeError("reduce_scatter: input must hold group size x output elements");
    }
    const auto type = nccl_type(in.scalar_type(), "reduce_scatter");
    return enqueue("reduce_scatter", g, in, {out, in}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                               type, ncclSum, c, s);
    });
  }

  WorkPtr all_gather(at::Tensor out, at::Tensor in, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "all_gather");
    check(out, "all_gather");
    check(in, "all_gather");
    if (out.numel() != in.numel() * static_cast<int64_t>(g.size()) ||
        in.scalar_type() != out.scalar_type()) {
      throw RuntimeError("all_gather: output must hold group size x input elements");
    }
    const auto type = nccl_type(in.scalar_type(), "all_gather");
    return enqueue("all_gather", g, in, {out, in}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), type, c,
                           s);
    });
  }

  WorkPtr broadcast(at::Tensor t, int root, const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "broadcast");
    check(t, "broadcast");
    const int root_index = index_in(g, root);
    if (root_index < 0) throw RuntimeError("broadcast: root is not in group " + group_text(g));
    const auto type = nccl_type(t.scalar_type(), "broadcast");
    return enqueue("broadcast", g, t, {t}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type,
                           root_index, c, s);
    });
  }

  WorkPtr send(at::Tensor t, int peer, std::uint32_t tag) override {
    return p2p(true, std::move(t), peer, tag);
  }
  WorkPtr recv(at::Tensor t, int peer, std::uint32_t tag) override {
    return p2p(false, std::move(t), peer, tag);
  }

  void barrier(const GroupSpec& group) override {
    const auto g = resolve_group(group, world_, rank_, "barrier");
    float* buf = barrier_buf_;
    enqueue("barrier", g, at::Tensor(), {}, [buf](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, s);
    })->wait(timeout_);
  }

 private:
  using Launch = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;
  struct Op {
    std::vector<int> group;
    std::string text;
    cudaEvent_t ready = nullptr;
    Launch launch;
    std::shared_ptr<NcclWork> work;
  };

  void check(const at::Tensor& t, const std::string& op) const {
    check_tensor(t, op, "tensor");
    if (!t.device().is_cuda() || t.device().index() != device_) {
      throw RuntimeError(op +
                         ": the NCCL backend needs tensors on cuda:" + std::to_string(device_));
    }
  }

  ncclComm_t init_comm(const std::vector<int>& group, const std::string& name) {
    const std::string key = name + "/id";
    ncclUniqueId id;
    if (group.front() == rank_) {
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store_->with_prefix(prefix_)->set(key, std::string(id.internal, sizeof(id.internal)));
    } else {
      const std::string v = store_->with_prefix(prefix_)->get(key, timeout_);
      if (v.size() != sizeof(id.internal)) throw RuntimeError("nccl: malformed id for " + name);
      std::copy(v.begin(), v.end(), id.internal);
    }
    ncclComm_t comm = nullptr;
    nccl_check(ncclCommInitRank(&comm, static_cast<int>(group.size()), id, index_in(group, rank_)),
               "ncclCommInitRank for " + name + " " + group_text(group));
    return comm;
  }

  // The point where LibTorch's queued work on the legacy default stream ends.
  cudaEvent_t record_ready() {
    cudaEvent_t ev = nullptr;
    cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ev, cudaStreamLegacy), "cudaEventRecord");
    return ev;
  }

  // Waits for `ready` on `stream`, launches, records the completion event into `work`.
  void launch_on(cudaStream_t stream, ncclComm_t comm, cudaEvent_t ready, const Launch& launch,
                 NcclWork& work, const std::string& text) {
    cuda_check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);
    nccl_check(launch(comm, stream), text);
    cudaEvent_t done = nullptr;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(done, stream), "cudaEventRecord");
    work.launched(done, comm);
  }

  WorkPtr enqueue(const std::string& name, const std::vector<int>& group, const at::Tensor& t,
                  std::vector<at::Tensor> keep, Launch launch) {
    // Numbered, stream-ordered and queued under one lock, so the worker launches the ops in
    // the order of their sequence numbers even with several issuing threads.
    DeviceScope on_device(device_);
    std::unique_lock<std::mutex> lock(mu_);
    Op op;
    op.group = group;
    const auto seq = progress_->issue(name, group);
    op.text = "nccl " + op_text(name, seq, group, t);
    op.ready = record_ready();
    op.launch = std::move(launch);
    op.work = std::make_shared<NcclWork>(
        op.text, rank_, timeout_,
        [board = std::weak_ptr<ProgressBoard>(progress_), group, seq, name] {
          auto b = board.lock();
          return b ? b->diagnose(group, seq, name) : std::string();
        },
        std::move(keep), aborted_);
    auto work = op.work;
    queue_.push_back(std::move(op));
    lock.unlock();
    cv_.notify_one();
    return work;
  }

  void worker_loop() {
    cudaSetDevice(device_);
    while (true) {
      Op op;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
        stopping = stop_;
      }
      if (stopping) {
        cudaEventDestroy(op.ready);
        op.work->fail(op.text + " cancelled: the communicator was destroyed first");
        continue;
      }
      try {
        const std::string key = group_key(op.group);
        auto& comm = comms_[key];
        if (!comm) comm = init_comm(op.group, "group/" + key);
        launch_on(coll_stream_, comm, op.ready, op.launch, *op.work, op.text);
      } catch (const std::exception& e) {
        *aborted_ = true;
        progress_->set_failed(op.text + ": " + e.what());
        op.work->fail(op.text + " failed on rank " + std::to_string(rank_) + ": " + e.what());
      }
    }
  }

  WorkPtr p2p(bool is_send, at::Tensor t, int peer, std::uint32_t tag) {
    const std::string name = is_send ? "send" : "recv";
    check(t, name);
    if (peer < 0 || peer >= world_ || peer == rank_) {
      throw RuntimeError(name + ": invalid peer " + std::to_string(peer));
    }
    const auto type = nccl_type(t.scalar_type(), name);
    const std::string what = std::string(is_send ? "send to" : "recv from") + " rank " +
                             std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
    const std::string text = "nccl " + what;
    progress_->note_p2p(what);
    auto work = std::make_shared<NcclWork>(
        text, rank_, timeout_,
        [board = std::weak_ptr<ProgressBoard>(progress_), peer] {
          auto b = board.lock();
          return b ? b->diagnose_peer(peer) : std::string();
        },
        std::vector<at::Tensor>{t}, aborted_);
    // Transfers from a lower to a higher rank use one communicator and stream, the reverse
    // direction the other, so a send and a recv between the same two ranks never queue
    // behind each other.
    const bool up = is_send ? rank_ < peer : peer < rank_;
    DeviceScope on_device(device_);
    std::lock_guard<std::mutex> lock(p2p_mu_);
    launch_on(
        up ? up_stream_ : down_stream_, up ? up_ : down_, record_ready(),
        [=](ncclComm_t c, cudaStream_t s) {
          return is_send ? ncclSend(t.data_ptr(), static_cast<size_t>(t.numel()), type, peer, c, s)
                         : ncclRecv(t.data_ptr(), static_cast<size_t>(t.numel()), type, peer, c, s);
        },
        *work, text);
    return work;
  }

  // The caller's store (rank 0's hosts the server: kept alive with us) and our own connection
  // to it, so our blocking waits never hold up the caller's use of theirs.
  std::shared_ptr<Store> job_store_;
  std::shared_ptr<Store> store_;
  int rank_;
  int world_;
  Ms timeout_;
  std::string prefix_;
  int device_ = 0;
  std::shared_ptr<ProgressBoard> progress_;
  cudaStream_t coll_stream_ = nullptr;
  cudaStream_t up_stream_ = nullptr;
  cudaStream_t down_stream_ = nullptr;
  float* barrier_buf_ = nullptr;
  std::map<std::string, ncclComm_t> comms_;  // worker thread only (after construction)
  ncclComm_t up_ = nullptr;
  ncclComm_t down_ = nullptr;
  std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  std::thread worker_;
  std::mutex p2p_mu_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Store> store, int rank,
                                                     int world_size, int local_rank,
                                                     std::chrono::milliseconds timeout,
                                                     const std::string& prefix) {
  return std::make_unique<NcclCommunicator>(std::move(store), rank, world_size, local_rank, timeout,
                                            prefix);
}

}  // namespace stratagem::comm
