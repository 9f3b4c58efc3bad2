#include "engine/plan/data_parallel.hpp"

#include <algorithm>

namespace stratagem::plan {

std::vector<BucketPlan> make_buckets(const BuildContext& ctx, int stage, bool per_unit) {
  const Layout& L = ctx.layout();
  const double cap = units::bucket_mb_to_bytes(ctx.strategy().bucket_mb);
  std::vector<BucketPlan> out;
  BucketPlan cur;
  double cur_bytes = 0;
  for (int chunk = static_cast<int>(L.stage_chunk_units[stage].size()) - 1; chunk >= 0; --chunk) {
    const auto [u0, u1] = L.stage_chunk_units[stage][chunk];
    for (int u = u1 - 1; u >= u0; --u) {
      if (L.units[u].params <= 0) continue;
      cur.units.push_back(u);
      cur.params += L.units[u].params;
      cur.expert_params += L.units[u].expert_params;
      cur_bytes += ctx.compute_bytes() * L.units[u].params;
      if (per_unit || cur_bytes >= cap) {
        out.push_back(std::move(cur));
        cur = {};
        cur_bytes = 0;
      }
    }
  }
  if (!cur.units.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<BucketPart> bucket_parts(const BuildContext& ctx, int rank, const BucketPlan& b) {
  if (b.expert_params <= 0) return {{b.params, false}};
  std::vector<BucketPart> out;
  const double dense = b.params - b.expert_params;
  if (dense > 0 && ctx.group_size(ctx.shard_group[rank]) > 1) out.push_back({dense, false});
  if (ctx.syncs_expert_grads(rank)) out.push_back({b.expert_params, true});
  return out;
}

namespace {

class GradientSync {
 public:
  GradientSync(BuildContext& ctx, RankDraft& d, const std::vector<BucketPlan>& buckets)
      : ctx_(ctx), d_(d), buckets_(buckets), shard_grads_(ctx.shards_grads(d.rank)) {
    bucket_of_.assign(ctx.layout().units.size(), -1);
    for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
      for (int u : buckets[b].units) bucket_of_[u] = b;
      remaining_.push_back(static_cast<int>(buckets[b].units.size()));
    }
    const int last_unit = static_cast<int>(ctx.layout().units.size()) - 1;
    tied_unit_ = ctx.tied_group[d.rank] < 0 ? -1 : d.stage == 0 ? 0 : last_unit;
    defer_tied_ = tied_unit_ >= 0 && scenario::shards_optimizer(ctx.strategy().sharding) &&
                  ctx.syncs_grads(d.rank) && !shard_grads_;
  }

  void run() {
    const auto& st = ctx_.strategy();
    const double pc = ctx_.compute_bytes();
    if (ctx_.syncs_grads(d_.rank)) {
      for (Step& s : d_.steps) {
        // Gradients are final after a backward, or a zero-bubble schedule's W pass.
        if (s.phase != Phase::backward && s.phase != Phase::backward_weight) continue;
        if (shard_grads_) {
          add_effect(
              d_, s,
              {TensorClass::comm_buckets, pc * ctx_.units_params(s.unit_begin, s.unit_end), true});
        }
        const bool launches = shard_grads_ || s.microbatch == st.grad_accum - 1;
        if (launches) finish_units(s);
      }
    }
    if (tied_unit_ >= 0) {
      const double bytes = pc * tied_table_params();
      const DraftRef tied =
          d_.add(Stream::collective,
                 draft_collective(ctx_, CollectiveKind::all_reduce, CommPurpose::tied_embedding,
                                  ctx_.tied_group[d_.rank], bytes, -1, 0, 0),
                 {d_.last_compute()});
      d_.epilogue.push_back(tied);
      d_.before_step.push_back(tied);
      if (deferred_bucket_ >= 0) {
        launch(buckets_[deferred_bucket_], deferred_bucket_, tied, d_.epilogue);
      }
    }
    d_.before_step.push_back(d_.last_compute());
  }

 private:
  // The word table on one tensor-parallel rank: its vocabulary shard.
  double tied_table_params() const {
    const auto& m = ctx_.scenario.model;
    return static_cast<double>(scenario::padded_vocab(m, ctx_.strategy().tp)) / ctx_.strategy().tp *
           static_cast<double>(m.hidden);
  }

  void finish_units(Step& s) {
    auto& out = s.after[static_cast<int>(Anchor::grad_sync)];
    for (int u = s.unit_end - 1; u >= s.unit_begin; --u) {
      const int b = bucket_of_[u];
      if (b < 0) continue;  // units without parameters sync nothing
      if (--remaining_[b] == 0) {
        const auto& bu = buckets_[b].units;
        remaining_[b] = static_cast<int>(bu.size());  // next round
        if (defer_tied_ && std::find(bu.begin(), bu.end(), tied_unit_) != bu.end()) {
          deferred_bucket_ = b;
          continue;
        }
        launch(buckets_[b], b, s.last(), out);
      }
    }
  }

  void launch(const BucketPlan& bucket, int index, DraftRef after, std::vector<DraftRef>& out) {
    for (const BucketPart& part : bucket_parts(ctx_, d_.rank, bucket)) {
      launch(bucket, part.params, part.experts, index, after, out);
    }
  }

  // One sync of `params` of the bucket's parameters: the routed experts' (`experts`) over the
  // expert-data-parallel group, others over the data-parallel (or shard) group.
  void launch(const BucketPlan& bucket, double params, bool experts, int index, DraftRef after,
              std::vector<DraftRef>& out) {
    const double bytes = ctx_.compute_bytes() * params;
    const auto [lo, hi] = std::minmax_element(bucket.units.begin(), bucket.units.end());
    const int rank = d_.rank;
    auto add = [&](CollectiveKind kind, int group, double b, DraftRef dep,
                   std::vector<MemEffect> fx) {
      const DraftRef op = d_.add(
          Stream::collective,
          draft_collective(ctx_, kind, CommPurpose::grad_sync, group, b, index, *lo, *hi + 1),
          {dep}, std::move(fx));
      out.push_back(op);
      d_.before_step.push_back(op);
      return op;
    };
    if (!shard_grads_ && !scenario::shards_optimizer(ctx_.strategy().sharding)) {
      add(CollectiveKind::all_reduce, experts ? ctx_.edp_group[rank] : ctx_.dp_group[rank], bytes,
          after, {});
      return;
    }
    // ZeRO-1 reduce-scatters the accumulated full gradients once; ZeRO-2/3 and FSDP do it
    // every micro-batch and free the staged unsharded gradients.
    std::vector<MemEffect> fx;
    if (shard_grads_) fx.push_back({TensorClass::comm_buckets, -bytes, true});
    const DraftRef rs =
        add(CollectiveKind::reduce_scatter, experts ? ctx_.edp_group[rank] : ctx_.shard_group[rank],
            bytes, after, std::move(fx));
    const int replica = ctx_.replica_group[rank];
    if (!experts && replica >= 0 && ctx_.group_size(replica) > 1) {
      // HYBRID_SHARD: the shards are then all-reduced across the node replicas.
      add(CollectiveKind::all_reduce, replica, bytes / ctx_.group_size(ctx_.shard_group[rank]), rs,
          {});
    }
  }

  BuildContext& ctx_;
  RankDraft& d_;
  const std::vector<BucketPlan>& buckets_;
  const bool shard_grads_;
  std::vector<int> bucket_of_, remaining_;
  int tied_unit_ = -1;
  bool defer_tied_ = false;
  int deferred_bucket_ = -1;
};

}  // namespace

void add_gradient_sync(BuildContext& ctx, RankDraft& d, const std::vector<BucketPlan>& buckets) {
  GradientSync(ctx, d, buckets).run();
}

}  // namespace stratagem::plan
