#include "sim/simulator.hpp"

#include <algorithm>

#include "engine/result/metrics.hpp"
#include "engine/scenario/error.hpp"
#include "sim/event_queue.hpp"
#include "sim/flow_network.hpp"
#include "sim/jitter.hpp"
#include "sim/plan_index.hpp"

namespace stratagem::sim {

namespace {

enum EventKind : std::uint32_t { kComputeDone, kFlowDone, kLatencyDone, kActivityDone, kSyncDone };

// Links per rank: NVLink/NVSwitch port and NIC, each direction.
constexpr int kLinksPerRank = 4;
int link_id(int rank, LinkKind kind, bool inbound) {
  return rank * kLinksPerRank + (kind == LinkKind::inter_node ? 2 : 0) + (inbound ? 1 : 0);
}

// One simulation: indices built once from the plan (plan_index.hpp), then the event loop.
class Run {
 public:
  Run(const plan::StepPlan& plan, const CostModels& models)
      : plan_(plan), models_(models), index_(plan, models) {}
  result::RunResult execute();

 private:
  void init_state();
  void init_result();
  void write_spans();
  /// `by_comm`: what released it last was an activity, not compute (see on_ready).
  void on_ready(plan::OpId id, double now, bool by_comm = false);
  void start_op(plan::OpId id, double now);
  void end_op(plan::OpId id, double now);
  void apply_effects(plan::OpId id, bool at_end, double now);
  /// Scales the bandwidth of every link of `rank` (compute slowing its communication).
  void set_rank_busy(int rank, bool busy, double now);
  bool compute_slows_comm_ = false;  ///< any compute_comm_slowdown > 0
  void comm_activity(int rank, int delta, double now);
  /// The rate of `rank`'s running compute: slowed while it communicates, and by the other
  /// ranks of its node computing (models_.contention_rate).
  double compute_rate(int rank) const;
  /// Running compute of `rank` continues at compute_rate(rank) from `now`.
  void rerate(int rank, double now);
  /// `rank` (and the folded replicas it stands for) starts (+1) or stops (−1) computing.
  void node_compute(int rank, int delta, double now);
  bool rerate_compute_ = false;  ///< a compute slow-down or contention: track running compute
  bool contention_ = false;      ///< models_.compute_contention > 0
  void start_activity(int a, double now);
  /// The last member of activity `a` arrived at `now`: start it then, or at the expected
  /// latest arrival when compute has a spread.
  void all_arrived(int a, double now);
  void launch(int a, double now);
  void begin_phase(int a, double now);
  void start_transfer(int a, double now);
  void finish_activity(int a, double now);
  [[noreturn]] void stalled() const;

  const plan::StepPlan& plan_;
  const CostModels& models_;
  const PlanIndex index_;
  EventQueue queue_;
  FlowNetwork flows_;
  result::RunResult result_;

  // Per op, what the run changes: unfinished deps + unfinished stream predecessor, when it
  // started and ended, and for running compute the work left at full speed, its rate, the
  // last update and the version of its completion event (one record per op, not six arrays).
  struct OpState {
    double start_s = 0, end_s = 0;
    double work_s = 0, rate = 1, last_s = 0;
    std::int32_t pending = 0;
    std::uint32_t version = 0;
  };
  std::vector<OpState> state_;
  // Compute spread (models_.has_jitter()): when each op arrived at its activity and
  // the variance its rank had accumulated since its last synchronisation.
  std::vector<double> arrive_s_, arrive_var_;
  // When each op's own compute deps (on its rank) last finished, and the rank's spread then
  // (-1: none yet): an activity that released it later is a common wait; its arrival is the
  // later of the two.
  std::vector<double> own_ready_s_, own_ready_var_;
  // Activities: collective instances, then transfers.
  int instances_ = 0;
  std::vector<std::int32_t> arrived_;
  std::vector<std::uint8_t> phase_idx_;
  std::vector<int> slot_of_;  ///< per activity: its slot in phases_ while it runs
  std::vector<CommPhases> phases_;
  std::vector<int> free_slots_;
  std::vector<int> links_scratch_;

  // Per rank.
  std::vector<int> comm_active_;
  /// When the rank's communication last went idle (-1: none yet), for cold starts.
  std::vector<double> comm_idle_since_;
  bool cold_starts_ = false;
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
  // Contention (contention_ only): ranks computing per node; per built rank its node and the
  // ranks it stands for per node (itself and its folded replicas); per node its built ranks.
  std::vector<int> node_computing_;
  std::vector<int> own_node_;
  std::vector<std::vector<std::pair<int, int>>> node_share_;
  std::vector<std::vector<int>> node_built_;
  // Resident bytes per class and in total, per built rank (folded ones run no ops):
  // memory_[slot_[rank]].
  std::vector<int> slot_;
  std::vector<std::array<double, plan::kTensorClassCount>> memory_;
  std::vector<double> memory_total_;

  std::size_t finished_ = 0;
  std::uint64_t events_ = 0;
};

double Run::rank_variance(int rank) const {
  const double cw = models_.compute_jitter_cv, cr = models_.rank_jitter_cv;
  return cw * cw * jitter_sum2_[rank] +
         cr * cr * jitter_sum_[rank] * jitter_sum_[rank];
}

void Run::init_state() {
  const std::size_t n = plan_.ops.size();
  state_.resize(n);
  for (std::size_t i = 0; i < n; ++i) state_[i].pending = index_.pending[i];
  instances_ = index_.instances;
  const auto activities = static_cast<std::size_t>(index_.activities());
  arrived_.assign(activities, 0);
  phase_idx_.assign(activities, 0);
  slot_of_.assign(activities, -1);
  const int world = static_cast<int>(plan_.ranks.size());
  comm_active_.assign(world, 0);
  comm_idle_since_.assign(world, -1.0);
  cold_starts_ = std::any_of(models_.cold_start_s.begin(), models_.cold_start_s.end(),
                             [](double x) { return x > 0; });
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
  contention_ = models_.compute_contention > 0;
  rerate_compute_ = models_.comm_compute_slowdown > 0 || contention_;
  if (contention_) {
    const int gpn = std::max(1, plan_.scenario.cluster.gpus_per_node);
    auto node_of = [&](int r) {
      return r < static_cast<int>(plan_.layout.coords.size()) ? plan_.layout.coords[r].node
                                                              : r / gpn;
    };
    int nodes = 0;
    for (int r = 0; r < world; ++r) nodes = std::max(nodes, node_of(r) + 1);
    node_computing_.assign(nodes, 0);
    node_built_.assign(nodes, {});
    own_node_.assign(world, 0);
    node_share_.assign(world, {});
    for (int r = 0; r < world; ++r) {
      const plan::RankInfo& info = plan_.ranks[r];
      const int built = info.built ? r : info.representative;
      auto& share = node_share_[built];
      const int n = node_of(r);
      auto it = std::find_if(share.begin(), share.end(), [&](const auto& x) { return x.first == n; });
      if (it == share.end()) {
        share.push_back({n, 1});
      } else {
        ++it->second;
      }
      if (info.built) {
        own_node_[r] = n;
        node_built_[n].push_back(r);
      }
    }
  }
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
  for (const OpInfo& op : index_.ops) {
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
      rr.tp = c.tp;
      rr.cp = c.cp;
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

void Run::apply_effects(plan::OpId id, bool at_end, double now) {
  const OpInfo& info = index_.ops[id];
  if (info.mem_count == 0) return;
  bool changed = false;
  const int k = slot_[info.rank];
  auto& bytes = memory_[k];
  const plan::MemEffect* effects = plan_.mem_effects.data() + info.mem_begin;
  for (std::uint32_t i = 0; i < info.mem_count; ++i) {
    const plan::MemEffect& e = effects[i];
    if (e.at_end != at_end || e.bytes == 0) continue;
    bytes[static_cast<int>(e.cls)] += e.bytes;
    memory_total_[k] += e.bytes;
    changed = true;
  }
  if (!changed) return;
  result::RankResult& rr = result_.ranks[info.rank];
  rr.memory.time_s.push_back(now);
  rr.memory.bytes.push_back(bytes);
  rr.peak_memory_bytes = std::max(rr.peak_memory_bytes, memory_total_[k]);
}

void Run::comm_activity(int rank, int delta, double now) {
  const int before = comm_active_[rank];
  comm_active_[rank] += delta;
  if (comm_active_[rank] == 0) comm_idle_since_[rank] = now;
  if (models_.comm_compute_slowdown <= 0 || (before == 0) == (comm_active_[rank] == 0)) return;
  rerate(rank, now);
}

double Run::compute_rate(int rank) const {
  const double slowdown = models_.comm_compute_slowdown;
  const double comm = slowdown > 0 && comm_active_[rank] > 0 ? 1.0 / (1.0 + slowdown) : 1.0;
  return contention_ ? comm * models_.contention_rate(node_computing_[own_node_[rank]]) : comm;
}

void Run::rerate(int rank, double now) {
  const double rate = compute_rate(rank);
  for (plan::OpId id : running_compute_[rank]) {
    OpState& st = state_[id];
    st.work_s = std::max(0.0, st.work_s - st.rate * (now - st.last_s));
    st.last_s = now;
    st.rate = rate;
    queue_.push(now + st.work_s / rate, kComputeDone, id, ++st.version);
  }
}

void Run::node_compute(int rank, int delta, double now) {
  for (const auto& [node, ranks] : node_share_[rank]) node_computing_[node] += delta * ranks;
  for (const auto& [node, ranks] : node_share_[rank]) {
    for (int r : node_built_[node]) rerate(r, now);
  }
}

void Run::start_op(plan::OpId id, double now) {
  const OpInfo& info = index_.ops[id];
  OpState& st = state_[id];
  st.start_s = now;
  apply_effects(id, false, now);
  if (info.category != Category::compute) {
    comm_activity(info.rank, +1, now);
    return;
  }
  st.work_s = info.duration_s;
  st.last_s = now;
  st.rate = 1.0;
  if (compute_slows_comm_ && !info.on_host) set_rank_busy(info.rank, true, now);
  if (rerate_compute_ && !info.on_host) {
    running_compute_[info.rank].push_back(id);
    // Contention: the node's count changes, every running op there (this one too) re-rated.
    if (contention_) {
      node_compute(info.rank, +1, now);
      return;
    }
    st.rate = compute_rate(info.rank);
  }
  queue_.push(now + st.work_s / st.rate, kComputeDone, id, ++st.version);
}

void Run::set_rank_busy(int rank, bool busy, double now) {
  for (int l = 0; l < kLinksPerRank; ++l) flows_.set_link_busy(now, rank * kLinksPerRank + l, busy);
}

void Run::end_op(plan::OpId id, double now) {
  const OpInfo& info = index_.ops[id];
  const int rank = info.rank;
  state_[id].end_s = now;
  apply_effects(id, true, now);
  const bool compute = info.category == Category::compute;
  if (compute) {
    if (models_.has_jitter()) {
      const double d = now - state_[id].start_s;
      jitter_sum_[rank] += d;
      jitter_sum2_[rank] += d * d;
    }
    if (compute_slows_comm_ && !info.on_host) set_rank_busy(rank, false, now);
    if (rerate_compute_ && !info.on_host) {
      auto& running = running_compute_[rank];
      running.erase(std::find(running.begin(), running.end(), id));
      if (contention_) node_compute(rank, -1, now);
    }
  } else {
    comm_activity(rank, -1, now);
  }
  ++finished_;
  for (const plan::OpId next : index_.successors(id)) {
    const Category next_category = index_.ops[next].category;
    if (models_.has_jitter() && compute && next_category != Category::compute) {
      own_ready_s_[next] = now;
      own_ready_var_[next] = rank_variance(rank);
    }
    if (--state_[next].pending != 0) continue;
    // Compute that waited for this activity now runs on its timeline.
    if (models_.has_jitter() && !compute && next_category == Category::compute &&
        index_.ops[next].rank == rank) {
      jitter_sum_[rank] = jitter_sum2_[rank] = 0;
    }
    on_ready(next, now, !compute);
  }
}

void Run::on_ready(plan::OpId id, double now, bool by_comm) {
  const OpInfo& info = index_.ops[id];
  if (info.category == Category::compute) {
    start_op(id, now);
    return;
  }
  const int a = info.activity;
  if (models_.has_jitter()) {
    // Released by an activity (the previous collective on its stream, a transfer) rather
    // than by its own compute, a member arrives at the later of that activity's end, which
    // its peers wait for alike (no spread), and its own compute's arrival (with the rank's
    // spread then). Counting the rank's spread at the activity's end instead made every
    // collective of a FIFO stream add the expected maximum on top of the one before.
    Arrival at{now, rank_variance(info.rank)};
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
  const auto members = static_cast<int>(index_.members(a).size());
  if (++arrived_[a] == members) all_arrived(a, now);
}

void Run::all_arrived(int a, double now) {
  if (!models_.has_jitter()) {
    launch(a, now);
    return;
  }
  arrivals_scratch_.clear();
  for (plan::OpId member : index_.members(a)) {
    arrivals_scratch_.push_back({arrive_s_[member], arrive_var_[member]});
  }
  if (a < instances_) {
    // A folded plan builds one replica per stage: the members it leaves out arrive like the
    // latest built one.
    const auto& inst = plan_.collectives[a];
    const int missing = static_cast<int>(plan_.groups[inst.group].ranks.size() - inst.ops.size());
    if (missing > 0) {
      const auto latest =
          std::max_element(arrivals_scratch_.begin(), arrivals_scratch_.end(),
                           [](const Arrival& x, const Arrival& y) { return x.mean_s < y.mean_s; });
      arrivals_scratch_.push_back(expected_latest_of_copies(*latest, missing));
    }
  }
  const Arrival latest = expected_latest(arrivals_scratch_);
  if (latest.mean_s > now) {
    queue_.push(latest.mean_s, kSyncDone, a);
  } else {
    launch(a, now);
  }
}

void Run::launch(int a, double now) {
  // A collective that one of its ranks starts cold — nothing in flight on it and nothing that
  // ended just now (it was computing, not queued behind another) — waits its backend's wake-up.
  double cold_s = 0;
  const double extra = cold_starts_ && a < instances_
                           ? models_.cold_start_s[index_.ops[index_.members(a)[0]].comm_op]
                           : 0.0;
  if (extra > 0) {
    for (plan::OpId member : index_.members(a)) {
      const int rank = index_.ops[member].rank;
      if (comm_active_[rank] == 0 && comm_idle_since_[rank] < now) {
        cold_s = extra;
        break;
      }
    }
  }
  for (plan::OpId member : index_.members(a)) start_op(member, now);
  // Phases live in a slot of a small pool while the activity runs (a few hundred at most
  // run at once; a slot per activity was megabytes written once each).
  int slot;
  if (free_slots_.empty()) {
    slot = static_cast<int>(phases_.size());
    phases_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slot_of_[a] = slot;
  const ActivityInfo& act = index_.activity[a];
  const NetworkModel& net = *models_.network;
  phases_[slot] =
      act.group >= 0 ? net.collective(act.kind, index_.group_shape[act.group], act.bytes)
      : act.gather > 1
          ? net.scattered_p2p(act.same_domain, act.bytes, act.gather, plan_.layout.gpus_per_node)
          : net.p2p(act.same_domain, act.bytes);
  if (cold_s > 0 && phases_[slot].count > 0) phases_[slot].phase[0].latency_s += cold_s;
  start_activity(a, now);
}

void Run::start_activity(int a, double now) {
  phase_idx_[a] = 0;
  begin_phase(a, now);
}

// A phase waits its latency, then its bytes flow; after the last phase the ops end.
void Run::begin_phase(int a, double now) {
  const CommPhases& ph = phases_[slot_of_[a]];
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
  const CommPhase& p = phases_[slot_of_[a]].phase[phase_idx_[a]];
  if (p.transfer_s <= 0) {
    ++phase_idx_[a];
    begin_phase(a, now);
    return;
  }
  links_scratch_.clear();
  const auto members = index_.members(a);
  if (a < instances_) {
    for (plan::OpId member : members) {
      const int rank = index_.ops[member].rank;
      links_scratch_.push_back(link_id(rank, p.link, false));
      links_scratch_.push_back(link_id(rank, p.link, true));
    }
  } else {
    links_scratch_.push_back(link_id(index_.ops[members[0]].rank, p.link, false));
    links_scratch_.push_back(link_id(index_.ops[members[1]].rank, p.link, true));
  }
  const int kind = index_.ops[members[0]].comm_op;
  flows_.start(now, links_scratch_, p.transfer_s, a, models_.compute_comm_slowdown[kind]);
}

void Run::finish_activity(int a, double now) {
  free_slots_.push_back(slot_of_[a]);
  for (plan::OpId member : index_.members(a)) end_op(member, now);
}

// Spans are written once the run is over, in one pass over the ops (reading each op's
// payload once, in order); each rank's are then sorted by start as they always were.
void Run::write_spans() {
  for (const plan::Op& op : plan_.ops) {
    const OpState& st = state_[op.id];
    result_.ranks[op.rank].spans.push_back(result::span_of(plan_, op, st.start_s, st.end_s));
  }
}

void Run::stalled() const {
  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    if (state_[i].pending == 0) continue;
    const plan::Op& op = plan_.ops[i];
    throw RuntimeError("simulation stalled: " + std::to_string(plan_.ops.size() - finished_) +
                       " ops never ran, e.g. op " + std::to_string(i) + " (rank " +
                       std::to_string(op.rank) + ", " + plan::to_string(op.stream) + " stream, " +
                       result::to_string(result::span_kind_of(op)) + ") waiting on " +
                       std::to_string(state_[i].pending) + " unfinished deps or peers");
  }
  throw RuntimeError("simulation stalled: " + std::to_string(plan_.ops.size() - finished_) +
                     " ops started but never finished (a collective missing members?)");
}

result::RunResult Run::execute() {
  init_state();
  init_result();
  const int world = static_cast<int>(plan_.ranks.size());
  queue_.reserve(plan_.ops.size() / 4 + 64);
  flows_.reset(world * kLinksPerRank, &queue_, kFlowDone);

  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    if (state_[i].pending == 0) on_ready(static_cast<plan::OpId>(i), 0.0);
  }
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    const double now = e.time_s;
    switch (e.kind) {
      case kComputeDone:
        if (e.version != state_[e.index].version) continue;
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
  write_spans();

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
