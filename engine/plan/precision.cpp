#include "engine/plan/precision.hpp"

namespace stratagem::plan {

namespace {

constexpr double kFoundInfBytes = 4.0;  // one float all-reduced (max) across ranks

}  // namespace

void add_loss_scale_check(BuildContext& ctx, RankDraft& d) {
  if (ctx.strategy().precision != scenario::Precision::fp16) return;
  const double grad_bytes = ctx.plan.ranks[d.rank].initial[static_cast<int>(TensorClass::grads)];
  Compute check;
  check.phase = Phase::loss_scale_check;
  check.stage = d.stage;
  check.bytes = 2.0 * grad_bytes;
  check.kernels = 2;
  check.dtype = scenario::DType::fp32;
  const DraftRef op = d.add(Stream::compute, check, d.before_step);
  d.epilogue.push_back(op);
  d.before_step = {op};
  if (ctx.group_size(ctx.world_group) > 1) {
    const DraftRef agree =
        d.add(Stream::collective,
              draft_collective(ctx, CollectiveKind::all_reduce, CommPurpose::found_inf,
                               ctx.world_group, kFoundInfBytes, -1, 0, 0),
              {op});
    d.epilogue.push_back(agree);
    d.before_step.push_back(agree);
  }
}

}  // namespace stratagem::plan
