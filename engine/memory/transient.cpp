#include "engine/memory/transient.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>

#include "engine/plan/plan.hpp"
#include "engine/workload/granularity.hpp"
#include "engine/workload/schedule.hpp"

namespace stratagem::memory {

namespace {

// A compute op of an item (a unit's recompute and backward count as one: what is live while
// either runs is the same but for the rebuilt bytes, which only add).
struct OpGroup {
  double act_delta = 0;   ///< activations allocated (> 0) or freed (< 0) at its end
  double recompute = 0;   ///< rebuilt bytes live while it runs
  bool gathers = false;   ///< consumes the next gather of the gather stream
  double gather = 0;      ///< that gather's bytes
  double frees_kept = 0;  ///< SHARD_GRAD_OP: kept gathered bytes freed at its end
  double stages = 0;      ///< unsharded gradients staged at its end
  double closes = 0;      ///< bucket bytes whose reduce-scatter it launches at its end
};

// Gradient buckets between ops: staged gradients whose bucket has not closed yet, and closed
// buckets whose reduce-scatter runs (freed by the end of the next op).
struct BucketState {
  double staged = 0;
  double reducing = 0;
  /// The last op consumed a gather: with prefetch 0 the next op's gather starts as it ends.
  bool after_gather = false;
  double live() const { return staged + reducing; }
};

struct Moment {
  double act = 0, gathered = 0, buckets = 0;
  double total() const { return act + gathered + buckets; }
};

// What an item does to the state the walk carries between items.
struct ItemSummary {
  int gathers = 0;                ///< gathers its ops consume
  double staged_delta = 0;        ///< staged gradients left after it, minus before
  double reducing_after = 0;      ///< buckets still being reduced when it ends
  bool ends_with_gather = false;  ///< its last op consumed a gather
};

using MemoKey = std::tuple<double, double, bool, std::vector<int>>;

class StageWalker {
 public:
  explicit StageWalker(const StageTransientInput& in)
      : in_(in), split_(scenario::splits_backward(in.schedule)) {
    const int chunks = in.chunks;
    closes_.resize(chunks);
    for (int c = 0; c < chunks; ++c) closes_[c].assign(in.chunk_units[c].size(), 0.0);
    const int buckets = in.grads_sharded ? assign_buckets() : 0;
    // The plan's cuts (buckets > 1 only when gradients are sharded).
    const workload::Granularity cuts = workload::step_granularity(
        in.params_sharded, in.recompute, in.grads_sharded, in.grads_sharded, buckets > 1);
    const bool per_unit_forward = cuts.per_unit_forward;
    const bool per_unit_backward = cuts.per_unit_backward;
    groups_.resize(chunks);
    summary_.resize(chunks);
    chunk_act_.assign(chunks, 0.0);
    chunk_gather_.assign(chunks, 0.0);
    chunk_held_.assign(chunks, 0.0);
    for (int c = 0; c < chunks; ++c) {
      for (const UnitTransient& u : in.chunk_units[c]) {
        chunk_act_[c] += u.act;
        chunk_gather_[c] += u.gather;
        if (split_ && in.recompute) chunk_held_[c] += u.recompute;
      }
      groups_[c][1] = per_unit_forward ? forward_units(c) : std::vector<OpGroup>{whole(c, true)};
      groups_[c][0] = per_unit_backward ? backward_units(c, split_)
                                        : std::vector<OpGroup>{whole(c, false, split_)};
      if (split_) {
        groups_[c][2] = {weight_pass(c)};
        // DualPipeV's whole backwards beside its B passes.
        groups_[c][3] = per_unit_backward ? backward_units(c, false)
                                          : std::vector<OpGroup>{whole(c, false, false)};
      }
      for (int f = 0; f < kSlots; ++f) {
        if (groups_[c][f].empty()) continue;
        ItemSummary& sum = summary_[c][f];
        for (const OpGroup& g : groups_[c][f]) {
          sum.gathers += g.gathers ? 1 : 0;
          sum.staged_delta += g.stages - g.closes;
        }
        sum.reducing_after = groups_[c][f].back().closes;
        sum.ends_with_gather = groups_[c][f].back().gathers;
      }
    }
  }

  TransientPeak run() {
    const std::vector<workload::ScheduleItem> order =
        workload::schedule_order(in_.schedule, in_.pp, in_.stage, in_.chunks, in_.microbatches);
    const int n = static_cast<int>(order.size());
    // next_gathering[i]: the first item at or after i that gathers anything (n if none).
    std::vector<int> next_gathering(n + 1, n);
    for (int i = n - 1; i >= 0; --i) {
      next_gathering[i] = gather_count(order[i]) > 0 ? i : next_gathering[i + 1];
    }

    // An item's own peak depends only on its (direction, chunk), the buckets left by the
    // previous one and the gathers that follow it (prefetch): memoised on those. Activations
    // and kept gathers of earlier items add a constant to it. Without gathers or buckets
    // (every pipeline), (direction, chunk) alone decides: a table, no lookups.
    const bool carries = in_.params_sharded || in_.grads_sharded;
    std::vector<std::array<Moment, kSlots>> plain(carries ? 0 : in_.chunks);
    for (int c = 0; c < static_cast<int>(plain.size()); ++c) {
      for (int f = 0; f < kSlots; ++f) {
        if (!groups_[c][f].empty()) plain[c][f] = local_peak(item_of(c, f), {}, {});
      }
    }
    std::map<MemoKey, Moment> memo;
    TransientPeak peak;
    double best = 0, acts_before = 0, kept_before = 0;
    int in_flight = 0;
    BucketState buckets;
    std::vector<int> codes;
    std::vector<double> lookahead;
    auto memoised = [&](int i) -> const Moment& {
      codes.assign(1, code(order[i]));
      lookahead.clear();
      int ahead = 0;
      for (int j = next_gathering[i + 1]; j < n && ahead <= in_.prefetch;
           j = next_gathering[j + 1]) {
        codes.push_back(code(order[j]));
        const int take = std::min(gather_count(order[j]), in_.prefetch + 1 - ahead);
        append_gathers(order[j], lookahead, take);
        ahead += take;
      }
      MemoKey key{buckets.staged, buckets.reducing, buckets.after_gather, codes};
      auto it = memo.find(key);
      if (it == memo.end()) it = memo.emplace(key, local_peak(order[i], buckets, lookahead)).first;
      return it->second;
    };
    for (int i = 0; i < n; ++i) {
      const workload::ScheduleItem& item = order[i];
      const Moment& local = carries ? memoised(i) : plain[item.chunk][slot(item)];
      const double total = acts_before + kept_before + local.total();
      if (total > best) {
        best = total;
        peak.activations = acts_before + local.act;
        peak.gathered_params = kept_before + local.gathered;
        peak.comm_buckets = local.buckets;
      }
      const int c = item.chunk;
      const bool keeps = in_.params_sharded && !in_.reshard_after_forward;
      if (item.forward) {
        acts_before += chunk_act_[c];
        if (keeps) kept_before += chunk_gather_[c];
        peak.max_in_flight = std::max(peak.max_in_flight, ++in_flight);
      } else if (item.releases()) {
        const bool weight = item.pass == workload::BackwardPass::weight;
        acts_before -= chunk_act_[c] + (weight ? chunk_held_[c] : 0.0);
        if (keeps) kept_before -= chunk_gather_[c];
        --in_flight;
      } else {
        acts_before += chunk_held_[c];  // a B pass: what it rebuilt waits for the W pass
      }
      buckets = after_item(item, buckets);
    }
    return peak;
  }

 private:
  // Buckets in backward order over the stage's units, as the builder fills them: one per unit
  // when parameters are sharded, else closed once they reach the cap (a unit is never split,
  // units without parameters are skipped). Records the bytes each unit's backward closes.
  int assign_buckets() {
    int count = 0;
    double filling = 0;
    int last_c = -1, last_u = -1;
    for (int c = in_.chunks - 1; c >= 0; --c) {
      for (int u = static_cast<int>(in_.chunk_units[c].size()) - 1; u >= 0; --u) {
        const double bytes = in_.chunk_units[c][u].bucket;
        if (bytes <= 0) continue;
        filling += bytes;
        last_c = c;
        last_u = u;
        if (in_.params_sharded || filling >= in_.bucket_cap_bytes) {
          closes_[c][u] += filling;
          filling = 0;
          ++count;
        }
      }
    }
    if (filling > 0) {
      closes_[last_c][last_u] += filling;
      ++count;
    }
    return count;
  }

  std::vector<OpGroup> forward_units(int c) const {
    std::vector<OpGroup> out;
    for (const UnitTransient& u : in_.chunk_units[c]) {
      OpGroup g;
      g.act_delta = u.act;
      g.gathers = in_.params_sharded;
      g.gather = u.gather;
      out.push_back(g);
    }
    return out;
  }

  // A whole backward's ops, or (zero-bubble schedules) a B pass's: those free nothing, and
  // what the recompute rebuilt stays for the W pass.
  std::vector<OpGroup> backward_units(int c, bool input) const {
    const auto& units = in_.chunk_units[c];
    const bool keeps = in_.params_sharded && !in_.reshard_after_forward;
    std::vector<OpGroup> out;
    for (int k = static_cast<int>(units.size()) - 1; k >= 0; --k) {
      const UnitTransient& u = units[k];
      OpGroup g;
      g.recompute = in_.recompute ? u.recompute : 0.0;
      g.act_delta = input ? g.recompute : -u.act;
      g.gathers = in_.params_sharded && in_.reshard_after_forward;
      g.gather = u.gather;
      g.frees_kept = keeps ? u.gather : 0.0;
      g.stages = in_.grads_sharded ? u.bucket : 0.0;
      g.closes = closes_[c][k];
      out.push_back(g);
    }
    return out;
  }

  // A zero-bubble W pass: frees the chunk's activations and what its B pass rebuilt.
  OpGroup weight_pass(int c) const {
    OpGroup g;
    g.act_delta = -(chunk_act_[c] + chunk_held_[c]);
    return g;
  }

  // One op for the whole chunk (parameters not sharded, no recomputation, one bucket).
  OpGroup whole(int c, bool forward, bool input = false) const {
    OpGroup g;
    g.act_delta = forward ? chunk_act_[c] : input ? 0.0 : -chunk_act_[c];
    if (!forward && in_.grads_sharded) {
      for (std::size_t k = 0; k < in_.chunk_units[c].size(); ++k) {
        g.stages += in_.chunk_units[c][k].bucket;
        g.closes += closes_[c][k];
      }
    }
    return g;
  }

  // Where an item's ops are kept: [chunk][slot], slot 1 a forward, 0 a backward (a B pass
  // in a zero-bubble schedule), 2 a W pass, 3 a whole backward in a zero-bubble schedule.
  static constexpr int kSlots = 4;
  int slot(const workload::ScheduleItem& item) const {
    if (item.forward) return 1;
    switch (item.pass) {
      case workload::BackwardPass::weight:
        return 2;
      case workload::BackwardPass::full:
        return split_ ? 3 : 0;
      default:
        return 0;
    }
  }
  workload::ScheduleItem item_of(int chunk, int slot) const {
    using workload::BackwardPass;
    const BackwardPass pass = slot == 2             ? BackwardPass::weight
                              : slot == 0 && split_ ? BackwardPass::input
                                                    : BackwardPass::full;
    return {slot == 1, chunk, 0, pass};
  }

  const std::vector<OpGroup>& groups(const workload::ScheduleItem& item) const {
    return groups_[item.chunk][slot(item)];
  }

  int code(const workload::ScheduleItem& item) const { return item.chunk * kSlots + slot(item); }

  const ItemSummary& summary(const workload::ScheduleItem& item) const {
    return summary_[item.chunk][slot(item)];
  }

  int gather_count(const workload::ScheduleItem& item) const { return summary(item).gathers; }

  // The item's first `limit` gathers, in the order its ops need them.
  void append_gathers(const workload::ScheduleItem& item, std::vector<double>& out,
                      int limit = std::numeric_limits<int>::max()) const {
    for (const OpGroup& g : groups(item)) {
      if (limit <= 0) return;
      if (g.gathers) {
        out.push_back(g.gather);
        --limit;
      }
    }
  }

  // Every op ends the previous reduce-scatter and may stage gradients and close buckets.
  BucketState after_item(const workload::ScheduleItem& item, BucketState b) const {
    const ItemSummary& sum = summary(item);
    b.staged += sum.staged_delta;
    b.reducing = sum.reducing_after;
    b.after_gather = sum.ends_with_gather;
    return b;
  }

  // The largest moment inside one item, activations relative to the item's start.
  Moment local_peak(const workload::ScheduleItem& item, BucketState b,
                    const std::vector<double>& lookahead) const {
    std::vector<double> gathers;  // this item's gathers, in op order, then those that follow
    append_gathers(item, gathers);
    gathers.insert(gathers.end(), lookahead.begin(), lookahead.end());
    const std::size_t ahead = static_cast<std::size_t>(in_.prefetch) + 1;
    // Gathers [from, to): started and not yet consumed.
    auto window = [&](std::size_t from, std::size_t to) {
      double sum = 0;
      for (std::size_t g = from; g < std::min(to, gathers.size()); ++g) sum += gathers[g];
      return sum;
    };
    Moment best{0, 0, -std::numeric_limits<double>::infinity()};
    auto consider = [&best](const Moment& m) {
      if (m.total() > best.total()) best = m;
    };
    const bool keeps = !in_.reshard_after_forward;
    std::size_t consumed = 0;  // gathers whose op has ended
    double act = 0, kept = 0;  // kept: SHARD_GRAD_OP gathers kept (> 0) or freed (< 0) here
    for (const OpGroup& g : groups(item)) {
      // Without prefetch, an op that needs a gather waits for it, and the gather started when
      // the previous op ended, as did the reduce-scatter that op launched (same group, same
      // links): a smaller reduce-scatter has finished before this op starts; an equal one
      // ends with the gather, when the op starts, and still counts.
      if (in_.prefetch == 0 && g.gathers && b.after_gather && b.reducing < g.gather) {
        b.reducing = 0;
      }
      // While it runs: its own gather and the next `prefetch` are live.
      consider({act + g.recompute, kept + window(consumed, consumed + ahead), b.live()});
      if (g.gathers) {
        if (keeps) kept += g.gather;
        ++consumed;
      }
      kept -= g.frees_kept;
      act += g.act_delta;
      b.staged += g.stages - g.closes;
      b.reducing = g.closes;  // the previous reduce-scatter has finished by now
      b.after_gather = g.gathers;
      // Just after its end, when the gathers that waited for it have started (the same
      // instant) and the reduce-scatter it launched runs.
      consider({act, kept + window(consumed, consumed + ahead), b.live()});
    }
    return best;
  }

  const StageTransientInput& in_;
  const bool split_;  ///< zero-bubble: backward items are B and W passes
  std::vector<std::array<std::vector<OpGroup>, kSlots>> groups_;  // [chunk][slot]
  std::vector<std::array<ItemSummary, kSlots>> summary_;          // [chunk][slot]
  std::vector<std::vector<double>> closes_;                       // [chunk][unit]
  std::vector<double> chunk_act_, chunk_gather_;
  /// What a chunk's B pass rebuilds (recomputation) and its W pass frees.
  std::vector<double> chunk_held_;
};

}  // namespace

TransientPeak stage_transient_peak(const StageTransientInput& input) {
  return StageWalker(input).run();
}

}  // namespace stratagem::memory
