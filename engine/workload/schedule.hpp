#pragma once
// Pipeline schedules as Megatron-LM runs them (schedules.py): the order of forward and
// backward work of one stage. The bubble is whatever this order produces when executed.
#include <vector>

#include "engine/scenario/strategy.hpp"

namespace stratagem::workload {

/// The per-stage order of (forward/backward, chunk, micro-batch) work for a schedule, as
/// Megatron-LM runs it. Exposed for the memory model and tests.
struct ScheduleItem {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
};
std::vector<ScheduleItem> schedule_order(scenario::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches);

}  // namespace stratagem::workload
