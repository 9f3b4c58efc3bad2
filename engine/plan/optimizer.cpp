#include "engine/plan/optimizer.hpp"

#include <algorithm>

namespace stratagem::plan {

namespace {

constexpr double kAdamFlopsPerParam = 10.0;
constexpr double kSgdFlopsPerParam = 4.0;

Compute optimizer_op(const BuildContext& ctx, int rank, int stage) {
  const auto& st = ctx.strategy();
  const double psi = ctx.optimizer_params(rank);
  const double pc = ctx.compute_bytes();
  const double master = scenario::has_master_weights(st) ? 4.0 : 0.0;
  const double states = scenario::optimizer_state_bytes_per_param(st.optimizer);
  Compute c;
  c.phase = Phase::optimizer;
  c.stage = stage;
  c.flops =
      psi * (st.optimizer == scenario::Optimizer::sgd ? kSgdFlopsPerParam : kAdamFlopsPerParam);
  // Read the gradient, read+write master and states, write the compute copy.
  c.bytes = psi * (pc + 2.0 * master + 2.0 * states + pc);
  c.kernels = 4;
  c.dtype = scenario::DType::fp32;
  c.on_host = st.offload_optimizer == scenario::Offload::cpu;
  c.params = psi;
  return c;
}

}  // namespace

void add_optimizer_step(BuildContext& ctx, RankDraft& d, const std::vector<BucketPlan>& buckets) {
  const auto& st = ctx.strategy();
  const DraftRef step = d.add(Stream::compute, optimizer_op(ctx, d.rank, d.stage), d.before_step);
  d.epilogue.push_back(step);
  // ZeRO-1/2: every rank updated its shard; gather the updated parameters.
  if (!ctx.syncs_grads(d.rank) || !scenario::shards_optimizer(st.sharding) ||
      scenario::shards_parameters(st.sharding)) {
    return;
  }
  for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
    const auto& bk = buckets[b];
    const auto [lo, hi] = std::minmax_element(bk.units.begin(), bk.units.end());
    auto gather = [&](int group, double params) {
      d.epilogue.push_back(
          d.add(Stream::collective,
                draft_collective(ctx, CollectiveKind::all_gather, CommPurpose::param_gather, group,
                                 ctx.compute_bytes() * params, b, *lo, *hi + 1),
                {step}));
    };
    for (const BucketPart& part : bucket_parts(ctx, d.rank, bk)) {
      gather(part.experts ? ctx.edp_group[d.rank] : ctx.shard_group[d.rank], part.params);
    }
  }
}

}  // namespace stratagem::plan
