#include "engine/workload/schedule.hpp"

namespace stratagem::workload {

namespace {

std::vector<ScheduleItem> gpipe(int microbatches) {
  std::vector<ScheduleItem> order;
  order.reserve(2 * static_cast<std::size_t>(microbatches));
  for (int mb = 0; mb < microbatches; ++mb) order.push_back({true, 0, mb});
  for (int mb = 0; mb < microbatches; ++mb) order.push_back({false, 0, mb});
  return order;
}

std::vector<ScheduleItem> one_f_one_b(int pp, int stage, int microbatches) {
  // PipeDream-Flush: p−s−1 warm-up forwards, then one forward / one backward, then the
  // remaining backwards.
  const int warmup = std::min(pp - stage - 1, microbatches);
  std::vector<ScheduleItem> order;
  order.reserve(2 * static_cast<std::size_t>(microbatches));
  for (int mb = 0; mb < warmup; ++mb) order.push_back({true, 0, mb});
  const int steady = microbatches - warmup;
  for (int i = 0; i < steady; ++i) {
    order.push_back({true, 0, warmup + i});
    order.push_back({false, 0, i});
  }
  for (int i = steady; i < microbatches; ++i) order.push_back({false, 0, i});
  return order;
}

std::vector<ScheduleItem> interleaved(int pp, int stage, int chunks, int microbatches) {
  // Narayanan et al. 2021: micro-batches go through the chunks in groups of pp.
  const int total = microbatches * chunks;
  auto item = [&](int k, bool forward) {
    const int in_group = k % (pp * chunks);
    int chunk = in_group / pp;
    if (!forward) chunk = chunks - 1 - chunk;
    const int mb = (k / (pp * chunks)) * pp + k % pp;
    return ScheduleItem{forward, chunk, mb};
  };
  int warmup;
  if (microbatches == pp) {
    warmup = total;  // Megatron runs all forwards first in this case
  } else {
    warmup = std::min((pp - stage - 1) * 2 + (chunks - 1) * pp, total);
  }
  std::vector<ScheduleItem> order;
  order.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) order.push_back(item(k, true));
  const int steady = total - warmup;
  for (int k = 0; k < steady; ++k) {
    order.push_back(item(warmup + k, true));
    order.push_back(item(k, false));
  }
  for (int k = steady; k < total; ++k) order.push_back(item(k, false));
  return order;
}

}  // namespace

std::vector<ScheduleItem> schedule_order(scenario::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches) {
  switch (schedule) {
    case scenario::Schedule::gpipe:
      return gpipe(microbatches);
    case scenario::Schedule::one_f_one_b:
      return one_f_one_b(pp, stage, microbatches);
    case scenario::Schedule::interleaved:
      return interleaved(pp, stage, chunks, microbatches);
  }
  return {};
}

}  // namespace stratagem::workload
