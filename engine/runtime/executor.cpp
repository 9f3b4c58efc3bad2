#include "engine/runtime/executor.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <ATen/ATen.h>

#include "engine/launch/heartbeat.hpp"
#include "engine/runtime/executor_run.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

std::string describe_op(const plan::StepPlan& plan, OpId id) {
  const plan::Op& op = plan.ops[id];
  std::ostringstream s;
  s << "op " << id << " (";
  if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
    s << plan::to_string(c->phase);
    if (c->microbatch >= 0) s << " mb " << c->microbatch;
    if (c->unit_end > c->unit_begin) s << " units [" << c->unit_begin << "," << c->unit_end << ")";
  } else if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
    s << plan::to_string(c->kind) << " " << plan::to_string(c->purpose) << " on "
      << plan.groups[c->group].label;
    if (c->unit_end > c->unit_begin) s << " units [" << c->unit_begin << "," << c->unit_end << ")";
  } else {
    const auto& p = std::get<plan::P2P>(op.payload);
    s << (p.send ? "send to rank " : "recv from rank ") << p.peer << " transfer " << p.transfer
      << (p.gradient ? " gradient" : " activation") << " mb " << p.microbatch;
  }
  s << ")";
  return s.str();
}

// ---- one step: ordering, communication, recording ------------------------------------------

Executor::Run::Run(Executor& e, std::int64_t step_index)
    : ex(e),
      plan(e.plan_),
      layout(e.state_->layout()),
      state(*e.state_),
      units(*e.units_),
      step(step_index),
      dp_index(e.plan_.layout.coords[e.rank_].dp) {
  busy.fill(plan::kNoOp);
  const auto& info = plan.ranks[ex.rank_];
  for (int s = 0; s < plan::kStreamCount; ++s) {
    for (OpId id : info.streams[s]) ops[id];
  }
  for (OpId id : rank_ops(plan, ex.rank_)) {
    const plan::Op& op = plan.ops[id];
    if (std::holds_alternative<plan::Collective>(op.payload)) collectives.push_back(id);
    if (std::holds_alternative<plan::P2P>(op.payload)) p2p_waiting.push_back(id);
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
      if (c->phase == plan::Phase::recompute) {
        for (int u = c->unit_begin; u < c->unit_end; ++u)
          recomputed.insert(unit_key(c->microbatch, u));
      }
    }
    if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
      if (c->kind == plan::CollectiveKind::all_reduce &&
          c->purpose == plan::CommPurpose::grad_sync) {
        for (OpId d : plan.deps_of(op)) {
          const auto* dc = std::get_if<plan::Collective>(&plan.ops[d].payload);
          if (dc && dc->kind == plan::CollectiveKind::reduce_scatter) has_followup.insert(d);
        }
      }
    }
  }
}

std::array<double, plan::kTensorClassCount> Executor::Run::class_bytes() const {
  auto b = state.resident_bytes();
  b[static_cast<int>(plan::TensorClass::activations)] = activation_bytes;
  b[static_cast<int>(plan::TensorClass::gathered_params)] = state.gathered_bytes();
  double buckets = state.staged_bytes() + inflight_bucket_bytes;
  for (const auto& [seg, t] : pending_shard) buckets += static_cast<double>(t.nbytes());
  b[static_cast<int>(plan::TensorClass::comm_buckets)] = buckets;
  return b;
}

bool Executor::Run::deps_done(const plan::Op& op) const {
  for (OpId d : plan.deps_of(op)) {
    const auto it = ops.find(d);
    if (it == ops.end()) {
      throw RuntimeError("rank " + std::to_string(ex.rank_) + ": " + describe_op(plan, op.id) +
                         " depends on another rank's op " + std::to_string(d));
    }
    if (it->second.status != 2) return false;
  }
  return true;
}

bool Executor::Run::heads(const plan::Op& op) const {
  const auto& stream = plan.ranks[ex.rank_].streams[static_cast<int>(op.stream)];
  const std::size_t h = head[static_cast<int>(op.stream)];
  return h < stream.size() && stream[h] == op.id;
}

void Executor::Run::begin(OpId id) {
  auto& r = ops[id];
  r.status = 1;
  r.start = Clock::now();
  launch::Heartbeat::tick(static_cast<std::uint64_t>(id));  // the launcher's liveness watch
  if (ex.options_.on_op_start) ex.options_.on_op_start(plan.ops[id]);
}

void Executor::Run::finish(OpId id, Clock::time_point end) {
  auto& r = ops[id];
  r.status = 2;
  r.end = end;
  record_span(id);
}

void Executor::Run::record_span(OpId id) {
  const auto& r = ops[id];
  spans.push_back(result::span_of(plan, plan.ops[id], seconds_between(t0, r.start),
                                  seconds_between(t0, r.end)));
}

bool Executor::Run::gathers_table(int u0, int u1) const {
  const int head = units.head_unit();
  if (!layout.params_sharded || !units.head_borrows_embedding() || u0 > head || head >= u1) {
    return false;
  }
  const plan::Unit& h = plan.layout.units[static_cast<std::size_t>(head)];
  return h.gather_params > h.params;
}

namespace {

// Both all-gathers of a head that gathers the borrowed word table with its own parameters.
class BothWork : public comm::Work {
 public:
  BothWork(comm::WorkPtr a, comm::WorkPtr b) : a_(std::move(a)), b_(std::move(b)) {}
  bool is_completed() override { return a_->is_completed() && b_->is_completed(); }
  void wait(std::chrono::milliseconds timeout) override {
    a_->wait(timeout);
    b_->wait(timeout);
  }

 private:
  comm::WorkPtr a_, b_;
};

}  // namespace

int Executor::Run::segment_of(const plan::Collective& c) const {
  for (int u = c.unit_begin; u < c.unit_end; ++u) {
    if (u < static_cast<int>(layout.segment_of_unit.size()) && layout.segment_of_unit[u] >= 0) {
      return layout.segment_of_unit[u];
    }
  }
  throw RuntimeError("a collective over units [" + std::to_string(c.unit_begin) + "," +
                     std::to_string(c.unit_end) + ") that rank " + std::to_string(ex.rank_) +
                     " does not own");
}

void Executor::Run::start_collective(OpId id) {
  const plan::Op& op = plan.ops[id];
  const auto& c = std::get<plan::Collective>(op.payload);
  if (c.purpose == plan::CommPurpose::tensor_parallel) return start_tp_collective(id);
  if (is_sequence_parallel_sync(c)) return start_sequence_parallel_sync(id);
  const comm::GroupSpec group{plan.groups[c.group].ranks};
  auto& r = ops[id];
  begin(id);
  comm::Communicator& comm = ex.comm_;
  switch (c.kind) {
    case plan::CollectiveKind::all_reduce: {
      at::Tensor t;
      comm::ReduceOp rop = comm::ReduceOp::sum;
      if (c.purpose == plan::CommPurpose::found_inf) {
        t = state.found_inf();
        rop = comm::ReduceOp::max;
      } else if (c.purpose == plan::CommPurpose::tied_embedding) {
        t = layout.segment_of_unit[0] >= 0 ? state.slot_grad(0, "wte")
                                           : state.slot_grad(units.head_unit(), "wte");
      } else {
        r.segment = segment_of(c);
        if (layout.opt_sharded) {
          auto it = pending_shard.find(r.segment);
          if (it == pending_shard.end()) {
            throw RuntimeError(describe_op(plan, id) + ": no reduce-scattered shard to continue");
          }
          t = it->second;
        } else {
          t = state.grads_full(r.segment);
        }
      }
      r.keep = {t};
      r.work = comm.all_reduce(t, group, rop);
      break;
    }
    case plan::CollectiveKind::reduce_scatter: {
      r.segment = segment_of(c);
      at::Tensor input =
          layout.grads_staged ? state.take_staged(r.segment) : state.grads_full(r.segment);
      at::Tensor output = state.new_shard_buffer(r.segment);
      if (layout.grads_staged) inflight_bucket_bytes += static_cast<double>(input.nbytes());
      r.keep = {output, input};
      r.work = comm.reduce_scatter(output, input, group);
      break;
    }
    case plan::CollectiveKind::all_gather: {
      r.segment = segment_of(c);
      if (id < layout.optimizer_op) {
        at::Tensor output = state.new_gather_buffer(r.segment);
        r.keep = {output, state.params_shard(r.segment)};
        r.work = comm.all_gather(output, r.keep[1], group);
        if (gathers_table(c.unit_begin, c.unit_end)) {
          const int table = state.segment_index(0);
          r.keep.push_back(state.new_gather_buffer(table));
          r.keep.push_back(state.params_shard(table));
          r.work = std::make_shared<BothWork>(r.work, comm.all_gather(r.keep[2], r.keep[3], group));
        }
      } else {
        // After the optimizer (ZeRO-1/2): every rank brings its updated shard.
        at::Tensor input = state.params_shard(r.segment).clone();
        at::Tensor output = state.params_full(r.segment);
        r.keep = {output, input};
        r.work = comm.all_gather(output, input, group);
      }
      break;
    }
    case plan::CollectiveKind::broadcast:
    case plan::CollectiveKind::all_to_all:
      throw RuntimeError("the runtime has no use for " + describe_op(plan, id));
  }
  issued(id);
}

void Executor::Run::issued(OpId id) {
  const plan::Op& op = plan.ops[id];
  busy[static_cast<int>(op.stream)] = id;
  ++head[static_cast<int>(op.stream)];
  watcher.watch(id, ops[id].work);
  sample_memory();
}

void Executor::Run::post_p2p(OpId id) {
  const plan::Op& op = plan.ops[id];
  const auto& p = std::get<plan::P2P>(op.payload);
  auto& r = ops[id];
  begin(id);
  const auto tag = static_cast<std::uint32_t>(p.transfer);
  if (p.send) {
    at::Tensor t;
    for (OpId d : plan.deps_of(op)) {
      auto it = produced.find(d);
      if (it != produced.end()) {
        t = std::move(it->second);
        produced.erase(it);
        break;
      }
    }
    if (!t.defined()) throw RuntimeError(describe_op(plan, id) + ": nothing to send");
    r.keep = {t};
    r.work = ex.comm_.send(t, p.peer, tag);
  } else {
    const auto& sc = plan.scenario;
    at::Tensor buf =
        at::empty({sc.strategy.micro_batch_size, units.boundary_tokens(), sc.model.hidden},
                  at::TensorOptions().dtype(units.numerics().boundary_dtype).device(ex.device_));
    r.keep = {buf};
    r.work = ex.comm_.recv(buf, p.peer, tag);
  }
  watcher.watch(id, r.work);
}

void Executor::Run::complete(OpId id, Clock::time_point when) {
  auto& r = ops[id];
  r.work->wait();  // completed: returns at once, or throws the op's error
  const plan::Op& op = plan.ops[id];
  if (const auto* c = std::get_if<plan::Collective>(&op.payload)) {
    busy[static_cast<int>(op.stream)] = plan::kNoOp;
    if (c->purpose == plan::CommPurpose::tensor_parallel) {
      complete_tp_collective(id);
    } else if (is_sequence_parallel_sync(*c)) {
      complete_sequence_parallel_sync(id);
    } else if (c->kind == plan::CollectiveKind::reduce_scatter) {
      if (layout.grads_staged) inflight_bucket_bytes -= static_cast<double>(r.keep[1].nbytes());
      if (has_followup.count(id)) {
        pending_shard[r.segment] = r.keep[0];
      } else {
        state.apply_reduced_shard(r.segment, r.keep[0]);
      }
    } else if (c->kind == plan::CollectiveKind::all_reduce &&
               c->purpose == plan::CommPurpose::grad_sync && layout.opt_sharded) {
      state.apply_reduced_shard(r.segment, r.keep[0]);
      pending_shard.erase(r.segment);
    } else if (c->kind == plan::CollectiveKind::all_gather && id < layout.optimizer_op) {
      state.hold_gathered(r.segment, r.keep[0]);
      if (r.keep.size() == 4) state.hold_gathered(state.segment_index(0), r.keep[2]);
    }
  } else {
    const auto& p = std::get<plan::P2P>(op.payload);
    if (!p.send) received[id] = r.keep[0];
  }
  r.keep.clear();
  r.work.reset();
  finish(id, when);
  sample_memory();
}

bool Executor::Run::issue_ready() {
  bool any = false;
  while (next_collective < collectives.size()) {
    const plan::Op& op = plan.ops[collectives[next_collective]];
    if (!heads(op) || busy[static_cast<int>(op.stream)] != plan::kNoOp || !deps_done(op)) break;
    start_collective(op.id);
    ++next_collective;
    any = true;
  }
  for (auto it = p2p_waiting.begin(); it != p2p_waiting.end();) {
    if (deps_done(plan.ops[*it])) {
      post_p2p(*it);
      it = p2p_waiting.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

void Executor::Run::stalled() {
  std::ostringstream s;
  s << "rank " << ex.rank_ << ": no progress for "
    << std::chrono::duration_cast<std::chrono::seconds>(ex.options_.timeout).count()
    << " s in step " << step + 1 << ";";
  for (const auto& [id, r] : ops) {
    if (r.status != 1) continue;
    s << " waiting on " << describe_op(plan, id);
    try {
      r.work->wait(std::chrono::milliseconds(1));  // the backend can name who is missing
    } catch (const std::exception& e) {
      s << ": " << e.what();
    }
    s << ";";
  }
  const auto& compute = plan.ranks[ex.rank_].streams[static_cast<int>(plan::Stream::compute)];
  const std::size_t h = head[static_cast<int>(plan::Stream::compute)];
  if (h < compute.size()) s << " compute is at " << describe_op(plan, compute[h]);
  throw RuntimeError(s.str());
}

void Executor::Run::execute() {
  t0 = Clock::now();
  memory.reset(0.0, class_bytes());
  const auto& compute = plan.ranks[ex.rank_].streams[static_cast<int>(plan::Stream::compute)];
  std::size_t done = 0;
  auto last_progress = Clock::now();
  while (done < ops.size()) {
    bool progressed = false;
    for (const auto& [id, when] : watcher.drain()) {
      complete(id, when);
      ++done;
      progressed = true;
    }
    progressed |= issue_ready();
    const std::size_t h = head[static_cast<int>(plan::Stream::compute)];
    if (h < compute.size() && deps_done(plan.ops[compute[h]])) {
      run_compute(compute[h]);
      ++done;
      progressed = true;
    }
    if (progressed) {
      last_progress = Clock::now();
      continue;
    }
    if (Clock::now() - last_progress > ex.options_.timeout) stalled();
    watcher.wait_any(std::chrono::milliseconds(1));
  }
  if (!acts.empty() || !tp_runs.empty() || !local_hidden.empty() || !local_grad.empty() ||
      !received.empty()) {
    throw RuntimeError("rank " + std::to_string(ex.rank_) +
                       ": the plan left activations or messages unused at the end of the step");
  }
  sample_memory();
}

// ---- the executor ---------------------------------------------------------------------------

Executor::Executor(const plan::StepPlan& plan, int rank, comm::Communicator& comm,
                   const DataSource& data, ExecutorOptions options, c10::Device device)
    : plan_(plan),
      rank_(rank),
      comm_(comm),
      data_(data),
      options_(std::move(options)),
      device_(device) {
  const auto& sc = plan.scenario;
  const bool head_copy = sc.model.tied_embeddings && sc.strategy.ends_apart();
  const auto& coord = plan.layout.coords.at(rank);
  units_ = std::make_unique<GptUnits>(sc.model, sc.training.seq_len, head_copy,
                                      Numerics::of(sc.strategy, device), device,
                                      TpShard{plan.layout.tp, coord.tp},
                                      sc.strategy.sequence_parallel);
  tp_piece_ = index_tp_chains(plan, rank);
  state_ =
      std::make_unique<ModelState>(plan, rank, *units_, options_.seed, options_.optimizer, device);
  if (sc.strategy.precision == scenario::Precision::fp16) {
    scaler_ = std::make_unique<DynamicLossScaler>(sc.strategy.loss_scale);
  }
}

Executor::~Executor() = default;

StepOutcome Executor::step(std::int64_t step) {
  // A heartbeat names the op its rank last started (described only when a beat is sent), with
  // the step numbered as the log numbers it (from 1).
  const launch::Heartbeat::Describer describer([this, step](std::uint64_t id) {
    return "step " + std::to_string(step + 1) + " " +
           describe_op(plan_, static_cast<plan::OpId>(id));
  });
  state_->zero_grads();
  Run run(*this, step);
  run.out.loss_scale = scaler_ ? scaler_->scale() : 1.0;
  const auto t0 = Clock::now();
  run.execute();
  StepOutcome out = std::move(run.out);
  out.seconds = seconds_between(t0, Clock::now());
  auto& tr = out.trace;
  const auto& coord = plan_.layout.coords[rank_];
  tr.rank = rank_;
  tr.stage = coord.stage;
  tr.dp = coord.dp;
  tr.tp = coord.tp;
  tr.cp = coord.cp;
  tr.node = coord.node;
  tr.spans = std::move(run.spans);
  std::sort(tr.spans.begin(), tr.spans.end(), [](const auto& a, const auto& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.op < b.op;
  });
  tr.memory = run.memory.track();
  tr.peak_memory_bytes = run.memory.peak();
  tr.capacity_bytes = plan_.scenario.cluster.gpu.memory_bytes;
  tr.host_bytes = state_->host_bytes();
  return out;
}

}  // namespace stratagem::runtime
