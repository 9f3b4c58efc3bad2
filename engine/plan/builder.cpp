// The plan builder: a sequence of passes over a BuildContext, one file each under
// engine/plan/ with its contract in its header:
//   mesh            ranks, coordinates, process groups, folding (mesh.hpp)
//   sharding        resident model states per rank (sharding.hpp)
//   schedule        per rank, compute steps in schedule order (schedule_pass.hpp)
//   tensor_parallel Megatron TP/SP collectives inside each step (tensor_parallel.hpp)
//   pipeline        p2p sends and receives between stages (pipeline.hpp)
//   sharding        ZeRO-3/FSDP parameter gathers with prefetch (sharding.hpp)
//   data_parallel   gradient buckets, their sync, tied embeddings (data_parallel.hpp)
//   precision       fp16 overflow check (precision.hpp)
//   optimizer       the step, ZeRO-1/2 parameter all-gathers (optimizer.hpp)
// Each per-rank pass reads the draft the earlier ones produced and adds ops, deps and memory
// effects to it; lowering (draft.hpp) then appends the rank's ops to the plan. Every strategy
// decision is made here; executors only follow ops and deps.
#include "engine/plan/builder.hpp"

#include "engine/plan/data_parallel.hpp"
#include "engine/plan/mesh.hpp"
#include "engine/plan/optimizer.hpp"
#include "engine/plan/pipeline.hpp"
#include "engine/plan/precision.hpp"
#include "engine/plan/schedule_pass.hpp"
#include "engine/plan/sharding.hpp"
#include "engine/plan/tensor_parallel.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::plan {

namespace {

void build_rank(BuildContext& ctx, Lowering& lowering, int rank) {
  RankDraft d;
  d.rank = rank;
  d.stage = ctx.layout().coords[rank].stage;
  const bool gathers = ctx.gathers_params(rank);
  const auto buckets = make_buckets(ctx, d.stage, gathers);
  const bool recompute = scenario::effective_recompute(ctx.strategy()) != scenario::Recompute::none;
  const bool several = buckets.size() > 1;
  build_steps(ctx, d,
              workload::step_granularity(gathers, recompute, ctx.syncs_grads(rank),
                                         ctx.shards_grads(rank), several));
  split_tensor_parallel(ctx, d);
  add_pipeline_transfers(ctx, d);
  add_parameter_gathers(ctx, d);
  add_gradient_sync(ctx, d, buckets);
  add_sequence_parallel_norm_sync(ctx, d);
  add_loss_scale_check(ctx, d);
  add_optimizer_step(ctx, d, buckets);
  lowering.lower_rank(d);
}

// About how many ops the plan will hold (an upper bound of its compute steps and the TP
// collectives splitting them), to refuse a plan that cannot fit in memory with one clear error
// instead of an allocation failure.
double estimated_ops(const scenario::Scenario& s, bool fold) {
  const auto& st = s.strategy;
  const double built = fold ? st.pp : static_cast<double>(s.world_size());
  const double units = static_cast<double>(s.model.layers) / st.pp + 2;
  const bool sharded = scenario::shards_parameters(st.sharding);
  const bool recompute = scenario::effective_recompute(st) != scenario::Recompute::none;
  // Steps per item: the chunk, or each unit (twice with recomputation); a TP chain is up to 6
  // ops, an MoE block's dispatch and combine add up to 6 more; sharded units add a gather and a
  // reduce-scatter each.
  const bool dispatched = s.model.moe && st.ep * st.etp > 1;
  const double chain = (st.tp > 1 ? 6 : 1) + (dispatched ? 6 : 0);
  const double per_item = sharded || recompute || st.tp > 1 || dispatched
                              ? units * ((recompute ? 2 : 1) * chain + (sharded ? 2 : 0))
                              : 3;
  return built * st.grad_accum * st.chunks * scenario::items_per_microbatch(st.schedule) * per_item;
}

}  // namespace

StepPlan build_plan(const scenario::Scenario& scenario, const BuildOptions& options) {
  if (const double ops = estimated_ops(scenario, options.fold); ops > kMaxPlanOps) {
    throw SpecError("strategy.grad_accum",
                    "the plan would hold about " + std::to_string(static_cast<long long>(ops)) +
                        " ops (" + std::to_string(scenario.strategy.grad_accum) + " micro-batches" +
                        (options.fold ? "" : " on every rank, unfolded") + "), more than the " +
                        std::to_string(static_cast<long long>(kMaxPlanOps)) +
                        " a simulation holds; use fewer micro-batches (a larger "
                        "micro_batch_size)" +
                        (options.fold ? "" : " or fold replicas (drop --no-fold)"));
  }
  BuildContext ctx(scenario, options);
  ctx.plan.scenario = scenario;
  build_mesh(ctx);
  Lowering lowering(ctx);
  for (int r = 0; r < ctx.plan.layout.world; ++r) {
    set_resident(ctx, r);
    if (ctx.plan.ranks[r].built) build_rank(ctx, lowering, r);
  }
  ctx.plan.model_flops_per_step =
      scenario::training_flops_per_token(scenario.model, scenario.training.seq_len) *
      static_cast<double>(scenario.tokens_per_step());
  lowering.check_pairs();
  return std::move(ctx.plan);
}

}  // namespace stratagem::plan
