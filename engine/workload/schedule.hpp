#pragma once
// Pipeline schedules: the order of forward and backward work of one stage. GPipe, 1F1B and
// interleaved 1F1B as Megatron-LM runs them (megatron/core/pipeline_parallel/schedules.py);
// the zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024) as
// PyTorch's torch.distributed.pipelining generates them (schedules.py:
// ScheduleInterleavedZeroBubble with _get_1f1b_rank_ops(enable_zero_bubble=True),
// ScheduleZBVZeroBubble and ScheduleDualPipeV), each backward split into its input-gradient pass
// (B, which the previous stage waits for) and its weight-gradient pass (W, deferred to fill the
// bubble). The bubble is whatever this order produces when executed.
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/scenario/strategy.hpp"

namespace stratagem::workload {

/// The per-stage order of (forward/backward, chunk, micro-batch) work for a schedule, as
/// Megatron-LM runs it. Exposed for the memory model and tests.
/// Which backward work an item does: all of it, or (zero-bubble schedules) the input-gradient
/// pass (B: activation gradients, sent to the previous stage) or the weight-gradient pass (W).
enum class BackwardPass : std::uint8_t { full, input, weight };
struct ScheduleItem {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
  BackwardPass pass = BackwardPass::full;  ///< backward items
  /// The item releases its micro-batch's activations: a whole backward, or the W pass that
  /// reads the linear layers' kept inputs (a B pass leaves them for it).
  bool releases() const { return !forward && pass != BackwardPass::input; }
  /// The item sends or receives pipeline messages: a forward, a whole backward or a B pass.
  bool on_pipeline() const { return forward || pass != BackwardPass::weight; }
};
std::vector<ScheduleItem> schedule_order(scenario::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches);

/// The virtual stage (position in the model, 0 first) that chunk `chunk` of pipeline rank
/// `stage` runs: chunk·pp + stage (looped: interleaved, interleaved-zb), and for zbv's V
/// stage (chunk 0) or 2·pp − 1 − stage (chunk 1), so that rank 0 holds the first and the last.
int virtual_stage(scenario::Schedule schedule, int pp, int stage, int chunk);
/// The inverse: the (stage, chunk) that runs virtual stage `vs`.
std::pair<int, int> stage_chunk(scenario::Schedule schedule, int pp, int vs);

}  // namespace stratagem::workload
