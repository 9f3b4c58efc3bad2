#include "sim/simulator.hpp"

#include <algorithm>
#include <iterator>

#include "engine/result/metrics.hpp"
#include "engine/spec/error.hpp"
#include "sim/event_queue.hpp"
#include "sim/flow_network.hpp"
#include "sim/jitter.hpp"

namespace stratagem::sim {

namespace {

enum EventKind : std::uint32_t { kComputeDone, kFlowDone, kLatencyDone, kActivityDone, kSyncDone };
enum class Category : std::uint8_t { compute, collective, p2p };

// Links per rank: NVLink/NVSwitch port and NIC, each direction.
constexpr int kLinksPerRank = 4;
int link_id(int rank, LinkKind kind, bool inbound) {
  return rank * kLinksPerRank + (kind == LinkKind::inter_node ? 2 : 0) + (inbound ? 1 : 0);
}

// One simulation: indices built once from the plan, then the event loop.
class Run {
 public:
  Run(const plan::StepPlan& plan, const CostModels& models) : plan_(plan), models_(models) {}
  result::RunResult execute();

 private:
  void build_indices();
  void init_result();
  /// `by_comm`: what released it last was an activity, not compute (see on_ready).
  void on_ready(plan::OpId id, double now, bool by_comm = false);
  void start_op(plan::OpId id, double now);
  void end_op(plan::OpId id, double now);
  void apply_effects(const plan::Op& op, bool at_end, double now);
  /// Scales the bandwidth of every link of `rank` (compute slowing its communication).
  void set_rank_busy(int rank, bool busy, double now);
  bool compute_slows_comm_ = false;  ///< any compute_comm_slowdown > 0
  void comm_activity(int rank, int delta, double now);
  void start_activity(int a, double now);
  /// The last member of activity `a` arrived at `now`: start it then, or at the expected
  /// latest arrival when compute has a spread.
  void all_arrived(int a, double now);
  void launch(int a, double now);
  void begin_phase(int a, double now);
  void start_transfer(int a, double now);
  void finish_activity(int a, double now);
  int node_of(int rank) const;
  int activity_of(plan::OpId id) const;
  [[noreturn]] void stalled() const;

  const plan::StepPlan& plan_;
  const CostModels& models_;
  EventQueue queue_;
  FlowNetwork flows_;
  result::RunResult result_;

  // Per op.
  std::vector<Category> category_;
  std::vector<std::int32_t> pending_;  // unfinished deps + unfinished stream predecessor
  std::vector<std::uint32_t> succ_begin_;
  std::vector<plan::OpId> succ_;
  std::vector<double> start_s_;
  // Compute spread (models_.has_jitter()): when each op arrived at its activity and
  // the variance its rank had accumulated since its last synchronisation.
  std::vector<double> arrive_s_, arrive_var_;
  // When each op's own compute deps (on its rank) last finished, and the rank's spread then
  // (-1: none yet): an activity that released it later is a common wait; its arrival is the
  // later of the two.
  std::vector<double> own_ready_s_, own_ready_var_;
  // Running compute ops (work left at full speed, rate, last update, version).
  std::vector<double> work_s_, rate_, last_s_;
  std::vector<std::uint32_t> version_;

  // Activities: collective instances, then transfers.
  int instances_ = 0;
  std::vector<std::int32_t> arrived_;
  std::vector<std::uint8_t> phase_idx_;
  std::vector<CommPhases> phases_;
  std::vector<GroupShape> group_shape_;
  std::vector<int> links_scratch_;

  // Per rank.
  std::vector<int> comm_active_;
  /// Each rank's compute since it last waited for an activity: the time summed and summed
  /// squared. Its arrival's spread is (jitter cv)² · Σd² + (rank cv)² · (Σd)². What the ranks
  /// waited for together (the activity's own spread) is common to them and shifts them alike,
  /// so it does not make one of them later than the others: it is not carried on. (Carrying
  /// it, as this did until 2026-12-01, compounded at every synchronisation: 2 % rank jitter
  /// made the default scenario's step 10× longer instead of the ≈ 1.4 · 2 % of 8 ranks.)
  std::vector<double> jitter_sum_, jitter_sum2_;
  double rank_variance(int rank) const;
  std::vector<Arrival> arrivals_scratch_;
  std::vector<std::vector<plan::OpId>> running_compute_;  // only with a compute slow-down
  // Resident bytes per class and in total, per built rank (folded ones run no ops):
  // memory_[slot_[rank]].
  std::vector<int> slot_;
  std::vector<std::array<double, plan::kTensorClassCount>> memory_;
  std::vector<double> memory_total_;

  std::size_t finished_ = 0;
  std::uint64_t events_ = 0;
};

// The NVLink domain a rank's links belong to: its node, or with a domain of several nodes
// (GB200 NVL72: 18 trays of 4 GPUs) the domain's index; `intra_node` links join its members.
int Run::node_of(int rank) const {
  const auto& coords = plan_.layout.coords;
  const int node = rank < static_cast<int>(coords.size())
                       ? coords[rank].node
                       : rank / std::max(plan_.layout.gpus_per_node, 1);
  return plan_.scenario.cluster.domain_of_node(node);
}

double Run::rank_variance(int rank) const {
  const double cw = models_.compute_jitter_cv, cr = models_.rank_jitter_cv;
  return cw * cw * jitter_sum2_[rank] +
         cr * cr * jitter_sum_[rank] * jitter_sum_[rank];
}

int Run::activity_of(plan::OpId id) const {
  const auto& payload = plan_.ops[id].payload;
  if (const auto* c = std::get_if<plan::Collective>(&payload)) return c->instance;
  return instances_ + std::get<plan::P2P>(payload).transfer;
}

void Run::build_indices() {
  const auto& ops = plan_.ops;
  const std::size_t n = ops.size();
  category_.resize(n);
  pending_.assign(n, 0);
  std::vector<std::uint32_t> succ_count(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const plan::Op& op = ops[i];
    if (op.id != static_cast<plan::OpId>(i)) {
      throw RuntimeError("plan: op at index " + std::to_string(i) + " has id " +
                         std::to_string(op.id) + " (ids must equal their index)");
    }
    category_[i] = static_cast<Category>(op.payload.index());
    pending_[i] = static_cast<std::int32_t>(op.dep_count);
    for (plan::OpId d : plan_.deps_of(op)) ++succ_count[d];
  }
  // FIFO streams: each op also waits for the previous op on its stream.
  const int world = static_cast<int>(plan_.ranks.size());
  // With serial collectives (a backend that runs a rank's collectives one at a time in issue
  // order, like our Gloo communicator) the gather and collective streams form one queue.
  std::vector<plan::OpId> merged;
  std::vector<int> built;  // a folded replica has no ops of its own
  for (int r = 0; r < world; ++r) {
    if (plan_.ranks[r].built) built.push_back(r);
  }
  auto for_stream_edges = [&](auto&& fn) {
    for (int r : built) {
      for (int s = 0; s < plan::kStreamCount; ++s) {
        const auto stream = static_cast<plan::Stream>(s);
        if (stream == plan::Stream::p2p) continue;
        if (models_.serial_collectives && stream == plan::Stream::gather) continue;
        const auto& list = plan_.ranks[r].streams[s];
        if (models_.serial_collectives && stream == plan::Stream::collective) {
          const auto& g = plan_.ranks[r].streams[static_cast<int>(plan::Stream::gather)];
          merged.clear();
          std::merge(list.begin(), list.end(), g.begin(), g.end(), std::back_inserter(merged));
          for (std::size_t k = 1; k < merged.size(); ++k) fn(merged[k - 1], merged[k]);
          continue;
        }
        for (std::size_t k = 1; k < list.size(); ++k) fn(list[k - 1], list[k]);
      }
    }
  };
  for_stream_edges([&](plan::OpId prev, plan::OpId next) {
    ++succ_count[prev];
    ++pending_[next];
  });
  succ_begin_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] = succ_begin_[i] + succ_count[i];
  succ_.resize(succ_begin_[n]);
  std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (plan::OpId d : plan_.deps_of(ops[i])) succ_[fill[d]++] = static_cast<plan::OpId>(i);
  }
  for_stream_edges([&](plan::OpId prev, plan::OpId next) { succ_[fill[prev]++] = next; });

  start_s_.assign(n, 0);
  work_s_.assign(n, 0);
  rate_.assign(n, 1);
  last_s_.assign(n, 0);
  version_.assign(n, 0);

  // Activities and their consistency with the ops.
  instances_ = static_cast<int>(plan_.collectives.size());
  const std::size_t activities = plan_.collectives.size() + plan_.transfers.size();
  arrived_.assign(activities, 0);
  phase_idx_.assign(activities, 0);
  phases_.assign(activities, CommPhases{});
  for (int c = 0; c < instances_; ++c) {
    for (plan::OpId id : plan_.collectives[c].ops) {
      const auto* col = std::get_if<plan::Collective>(&ops.at(id).payload);
      if (!col || col->instance != c) {
        throw RuntimeError("plan: collective instance " + std::to_string(c) + " lists op " +
                           std::to_string(id) + " which is not one of its collectives");
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (const auto* p = std::get_if<plan::P2P>(&ops[i].payload)) {
      const auto& t = plan_.transfers.at(p->transfer);
      if (t.send == plan::kNoOp || t.recv == plan::kNoOp) {
        throw RuntimeError("plan: transfer " + std::to_string(p->transfer) + " of op " +
                           std::to_string(i) + " lacks its " +
                           (t.send == plan::kNoOp ? "send" : "recv"));
      }
    }
  }
  group_shape_.resize(plan_.groups.size());
  std::vector<int> per_node(static_cast<std::size_t>(std::max(plan_.layout.nodes, 1)), 0);
  for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
    GroupShape shape;
    shape.size = static_cast<int>(plan_.groups[g].ranks.size());
    shape.nodes = 0;
    shape.per_node = 0;
    for (int r : plan_.groups[g].ranks) {
      const int node = node_of(r);
      if (node >= static_cast<int>(per_node.size())) per_node.resize(node + 1, 0);
      if (per_node[node]++ == 0) ++shape.nodes;
      shape.per_node = std::max(shape.per_node, per_node[node]);
    }
    for (int r : plan_.groups[g].ranks) per_node[node_of(r)] = 0;
    group_shape_[g] = shape;
  }
  comm_active_.assign(world, 0);
  jitter_sum_.assign(world, 0);
  jitter_sum2_.assign(world, 0);
  if (models_.has_jitter()) {
    arrive_s_.assign(n, 0);
    arrive_var_.assign(n, 0);
    own_ready_s_.assign(n, -1);
    own_ready_var_.assign(n, 0);
  }
  compute_slows_comm_ =
      std::any_of(models_.compute_comm_slowdown.begin(), models_.compute_comm_slowdown.end(),
                  [](double v) { return v > 0; });
  running_compute_.assign(world, {});
}

void Run::init_result() {
  const auto& s = plan_.scenario;
  result_.scenario = s;
  result_.executor = "sim";
  result_.hardware = models_.profile;
  const int world = static_cast<int>(plan_.ranks.size());
  result_.ranks.resize(world);
  slot_.assign(world, -1);
  int built = 0;
  for (int r = 0; r < world; ++r) {
    if (plan_.ranks[r].built) slot_[r] = built++;
  }
  memory_.assign(built, {});
  memory_total_.assign(built, 0);
  std::vector<std::size_t> spans(built, 0), effects(built, 0);
  for (const plan::Op& op : plan_.ops) {
    ++spans[slot_[op.rank]];
    effects[slot_[op.rank]] += op.mem_count;
  }
  for (int r = 0; r < world; ++r) {
    const plan::RankInfo& info = plan_.ranks[r];
    result::RankResult& rr = result_.ranks[r];
    rr.rank = r;
    if (r < static_cast<int>(plan_.layout.coords.size())) {
      const auto& c = plan_.layout.coords[r];
      rr.stage = c.stage;
      rr.dp = c.dp;
      rr.node = c.node;
    }
    rr.capacity_bytes = s.cluster.gpu.memory_bytes;
    rr.host_bytes = info.host_bytes;
    if (!info.built) {
      rr.same_as = info.representative;
      continue;
    }
    const int k = slot_[r];
    rr.spans.reserve(spans[k]);
    rr.memory.time_s.reserve(effects[k] + 1);
    rr.memory.bytes.reserve(effects[k] + 1);
    memory_[k] = info.initial;
    for (double b : info.initial) memory_total_[k] += b;
    rr.memory.time_s.push_back(0.0);
    rr.memory.bytes.push_back(memory_[k]);
    rr.peak_memory_bytes = memory_total_[k];
  }
}

void Run::apply_effects(const plan::Op& op, bool at_end, double now) {
  bool changed = false;
  const int k = slot_[op.rank];
  auto& bytes = memory_[k];
  for (const plan::MemEffect& e : plan_.effects_of(op)) {
    if (e.at_end != at_end || e.bytes == 0) continue;
    bytes[static_cast<int>(e.cls)] += e.bytes;
    memory_total_[k] += e.bytes;
    changed = true;
  }
  if (!changed) return;
  result::RankResult& rr = result_.ranks[op.rank];
  rr.memory.time_s.push_back(now);
  rr.memory.bytes.push_back(bytes);
  rr.peak_memory_bytes = std::max(rr.peak_memory_bytes, memory_total_[k]);
}

void Run::comm_activity(int rank, int delta, double now) {
  const int before = comm_active_[rank];
  comm_active_[rank] += delta;
  const double slowdown = models_.comm_compute_slowdown;
  if (slowdown <= 0 || (before == 0) == (comm_active_[rank] == 0)) return;
  const double rate = comm_active_[rank] > 0 ? 1.0 / (1.0 + slowdown) : 1.0;
  for (plan::OpId id : running_compute_[rank]) {
    work_s_[id] = std::max(0.0, work_s_[id] - rate_[id] * (now - last_s_[id]));
    last_s_[id] = now;
    rate_[id] = rate;
    queue_.push(now + work_s_[id] / rate, kComputeDone, id, ++version_[id]);
  }
}

void Run::start_op(plan::OpId id, double now) {
  const plan::Op& op = plan_.ops[id];
  start_s_[id] = now;
  apply_effects(op, false, now);
  if (category_[id] != Category::compute) {
    comm_activity(op.rank, +1, now);
    return;
  }
  const auto& c = std::get<plan::Compute>(op.payload);
  work_s_[id] = models_.compute->duration(c);
  last_s_[id] = now;
  rate_[id] = 1.0;
  if (models_.comm_compute_slowdown > 0 && !c.on_host) {
    if (comm_active_[op.rank] > 0) rate_[id] = 1.0 / (1.0 + models_.comm_compute_slowdown);
    running_compute_[op.rank].push_back(id);
  }
  if (compute_slows_comm_ && !c.on_host) set_rank_busy(op.rank, true, now);
  queue_.push(now + work_s_[id] / rate_[id], kComputeDone, id, ++version_[id]);
}

void Run::set_rank_busy(int rank, bool busy, double now) {
  for (int l = 0; l < kLinksPerRank; ++l) flows_.set_link_busy(now, rank * kLinksPerRank + l, busy);
}

void Run::end_op(plan::OpId id, double now) {
  const plan::Op& op = plan_.ops[id];
  apply_effects(op, true, now);
  if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
    if (models_.has_jitter()) {
      const double d = now - start_s_[id];
      jitter_sum_[op.rank] += d;
      jitter_sum2_[op.rank] += d * d;
    }
    if (compute_slows_comm_ && !c->on_host) set_rank_busy(op.rank, false, now);
    if (models_.comm_compute_slowdown > 0) {
      auto& running = running_compute_[op.rank];
      running.erase(std::find(running.begin(), running.end(), id));
    }
  } else {
    comm_activity(op.rank, -1, now);
  }
  result_.ranks[op.rank].spans.push_back(result::span_of(plan_, op, start_s_[id], now));
  ++finished_;
  for (std::uint32_t k = succ_begin_[id]; k < succ_begin_[id + 1]; ++k) {
    const plan::OpId next = succ_[k];
    if (models_.has_jitter() && category_[id] == Category::compute &&
        category_[next] != Category::compute) {
      own_ready_s_[next] = now;
      own_ready_var_[next] = rank_variance(op.rank);
    }
    if (--pending_[next] != 0) continue;
    // Compute that waited for this activity now runs on its timeline.
    if (models_.has_jitter() && category_[id] != Category::compute &&
        category_[next] == Category::compute && plan_.ops[next].rank == op.rank) {
      jitter_sum_[op.rank] = jitter_sum2_[op.rank] = 0;
    }
    on_ready(next, now, category_[id] != Category::compute);
  }
}

void Run::on_ready(plan::OpId id, double now, bool by_comm) {
  const plan::Op& op = plan_.ops[id];
  switch (category_[id]) {
    case Category::compute:
      start_op(id, now);
      return;
    case Category::collective:
    case Category::p2p: {
      const int a = activity_of(id);
      if (models_.has_jitter()) {
        // Released by an activity (the previous collective on its stream, a transfer) rather
        // than by its own compute, a member arrives at the later of that activity's end, which
        // its peers wait for alike (no spread), and its own compute's arrival (with the rank's
        // spread then). Counting the rank's spread at the activity's end instead made every
        // collective of a FIFO stream add the expected maximum on top of the one before.
        Arrival at{now, rank_variance(op.rank)};
        if (by_comm) {
          at = Arrival{now, 0.0};
          if (own_ready_s_[id] >= 0) {
            arrivals_scratch_.assign({at, {own_ready_s_[id], own_ready_var_[id]}});
            at = expected_latest(arrivals_scratch_);
          }
        }
        arrive_s_[id] = at.mean_s;
        arrive_var_[id] = at.variance_s2;
      }
      const int members = a < instances_ ? static_cast<int>(plan_.collectives[a].ops.size()) : 2;
      if (++arrived_[a] == members) all_arrived(a, now);
      return;
    }
  }
}

void Run::all_arrived(int a, double now) {
  if (!models_.has_jitter()) {
    launch(a, now);
    return;
  }
  arrivals_scratch_.clear();
  auto add = [&](plan::OpId member) {
    arrivals_scratch_.push_back({arrive_s_[member], arrive_var_[member]});
  };
  if (a < instances_) {
    const auto& inst = plan_.collectives[a];
    for (plan::OpId member : inst.ops) add(member);
    // A folded plan builds one replica per stage: the members it leaves out arrive like the
    // latest built one.
    const int missing = static_cast<int>(plan_.groups[inst.group].ranks.size() - inst.ops.size());
    if (missing > 0) {
      const auto latest =
          std::max_element(arrivals_scratch_.begin(), arrivals_scratch_.end(),
                           [](const Arrival& x, const Arrival& y) { return x.mean_s < y.mean_s; });
      arrivals_scratch_.push_back(expected_latest_of_copies(*latest, missing));
    }
  } else {
    add(plan_.transfers[a - instances_].send);
    add(plan_.transfers[a - instances_].recv);
  }
  const Arrival latest = expected_latest(arrivals_scratch_);
  if (latest.mean_s > now) {
    queue_.push(latest.mean_s, kSyncDone, a);
  } else {
    launch(a, now);
  }
}

void Run::launch(int a, double now) {
  if (a < instances_) {
    const auto& inst = plan_.collectives[a];
    for (plan::OpId member : inst.ops) start_op(member, now);
    phases_[a] = models_.network->collective(inst.kind, group_shape_[inst.group], inst.bytes);
  } else {
    const auto& tr = plan_.transfers[a - instances_];
    start_op(tr.send, now);
    start_op(tr.recv, now);
    const int src = plan_.ops[tr.send].rank, dst = plan_.ops[tr.recv].rank;
    phases_[a] = models_.network->p2p(node_of(src) == node_of(dst), tr.bytes);
  }
  start_activity(a, now);
}

void Run::start_activity(int a, double now) {
  phase_idx_[a] = 0;
  begin_phase(a, now);
}

// A phase waits its latency, then its bytes flow; after the last phase the ops end.
void Run::begin_phase(int a, double now) {
  const CommPhases& ph = phases_[a];
  if (phase_idx_[a] >= ph.count) {
    queue_.push(now, kActivityDone, a);
    return;
  }
  const CommPhase& p = ph.phase[phase_idx_[a]];
  if (p.latency_s > 0) {
    queue_.push(now + p.latency_s, kLatencyDone, a);
  } else {
    start_transfer(a, now);
  }
}

void Run::start_transfer(int a, double now) {
  const CommPhase& p = phases_[a].phase[phase_idx_[a]];
  if (p.transfer_s <= 0) {
    ++phase_idx_[a];
    begin_phase(a, now);
    return;
  }
  links_scratch_.clear();
  if (a < instances_) {
    for (plan::OpId member : plan_.collectives[a].ops) {
      const int rank = plan_.ops[member].rank;
      links_scratch_.push_back(link_id(rank, p.link, false));
      links_scratch_.push_back(link_id(rank, p.link, true));
    }
  } else {
    const auto& tr = plan_.transfers[a - instances_];
    links_scratch_.push_back(link_id(plan_.ops[tr.send].rank, p.link, false));
    links_scratch_.push_back(link_id(plan_.ops[tr.recv].rank, p.link, true));
  }
  const spec::CommOp kind =
      a < instances_ ? comm_op(plan_.collectives[a].kind) : spec::CommOp::sendrecv;
  flows_.start(now, links_scratch_, p.transfer_s, a,
               models_.compute_comm_slowdown[static_cast<int>(kind)]);
}

void Run::finish_activity(int a, double now) {
  if (a < instances_) {
    for (plan::OpId member : plan_.collectives[a].ops) end_op(member, now);
  } else {
    const auto& tr = plan_.transfers[a - instances_];
    end_op(tr.send, now);
    end_op(tr.recv, now);
  }
}

void Run::stalled() const {
  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    if (pending_[i] == 0) continue;
    const plan::Op& op = plan_.ops[i];
    throw RuntimeError("simulation stalled: " + std::to_string(plan_.ops.size() - finished_) +
                       " ops never ran, e.g. op " + std::to_string(i) + " (rank " +
                       std::to_string(op.rank) + ", " + plan::to_string(op.stream) + " stream, " +
                       result::to_string(result::span_kind_of(op)) + ") waiting on " +
                       std::to_string(pending_[i]) + " unfinished deps or peers");
  }
  throw RuntimeError("simulation stalled: " + std::to_string(plan_.ops.size() - finished_) +
                     " ops started but never finished (a collective missing members?)");
}

result::RunResult Run::execute() {
  build_indices();
  init_result();
  const int world = static_cast<int>(plan_.ranks.size());
  queue_.reserve(plan_.ops.size() / 4 + 64);
  flows_.reset(world * kLinksPerRank, &queue_, kFlowDone);

  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    if (pending_[i] == 0) on_ready(static_cast<plan::OpId>(i), 0.0);
  }
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    const double now = e.time_s;
    switch (e.kind) {
      case kComputeDone:
        if (e.version != version_[e.index]) continue;
        end_op(e.index, now);
        break;
      case kFlowDone: {
        if (!flows_.current(e.index, e.version)) continue;
        const int a = flows_.owner(e.index);
        flows_.finish(now, e.index);
        ++phase_idx_[a];
        begin_phase(a, now);
        break;
      }
      case kLatencyDone:
        start_transfer(e.index, now);
        break;
      case kActivityDone:
        finish_activity(e.index, now);
        break;
      case kSyncDone:
        launch(e.index, now);
        break;
    }
    ++events_;
  }
  if (finished_ != plan_.ops.size()) stalled();

  for (int r = 0; r < world; ++r) {
    result::RankResult& rr = result_.ranks[r];
    if (rr.same_as >= 0) {
      const result::RankResult& rep = result_.ranks.at(rr.same_as);
      rr.peak_memory_bytes = rep.peak_memory_bytes;
    }
    rr.oom = rr.peak_memory_bytes > rr.capacity_bytes;
    std::sort(rr.spans.begin(), rr.spans.end(), [](const result::Span& a, const result::Span& b) {
      return a.start_s != b.start_s ? a.start_s < b.start_s : a.op < b.op;
    });
  }
  result_.events = events_;
  result_.metrics = result::compute_metrics(result_, plan_.model_flops_per_step);
  return std::move(result_);
}

}  // namespace

result::RunResult Simulator::run(const plan::StepPlan& plan, const CostModels& models) {
  if (!models.compute || !models.network) throw RuntimeError("simulator: cost models not set");
  Run run(plan, models);
  return run.execute();
}

}  // namespace stratagem::sim
