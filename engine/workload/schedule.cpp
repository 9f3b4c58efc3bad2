#include "engine/workload/schedule.hpp"

#include <algorithm>

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

// PyTorch's zero-bubble order for `chunks` looped stages per rank (ScheduleInterleavedZeroBubble;
// one chunk is the paper's ZB-H1). Micro-batches go through the chunks in rounds of
// m / max(1, m / pp); warm-up takes (chunks − 1) rounds plus pp − 1 − stage forwards (one per
// hop, not 1F1B's two: B passes are shorter than whole backwards), then each step is one
// forward and one B; W passes follow their B in order, except that stage s leaves its first
// s W passes for later (they fill the cool-down, where the later stages idle in 1F1B); the
// cool-down runs the remaining B passes each with the oldest pending W, then the rest of the Ws.
std::vector<ScheduleItem> zero_bubble_looped(int pp, int stage, int chunks, int microbatches) {
  const int rounds = std::max(1, microbatches / pp);
  const int per_round = microbatches / rounds;
  const int total = microbatches * chunks;
  const int warmup = std::min((chunks - 1) * per_round + (pp - 1 - stage), total);
  const int ops = total + warmup;  // warm-up forwards, steady F+B pairs, cool-down Bs
  auto forward_chunk = [&](int op) { return (op / per_round) % chunks; };
  auto backward_chunk = [&](int op) { return chunks - 1 - ((op - warmup) / per_round) % chunks; };
  std::vector<int> next_f(chunks, 0), next_b(chunks, 0), next_w(chunks, 0);
  std::vector<int> backward_ops;  // the op index of each B, in order (its W's chunk)
  backward_ops.reserve(total);
  std::vector<ScheduleItem> order;
  order.reserve(3 * static_cast<std::size_t>(total));
  int weights = 0;
  auto weight = [&] {
    const int c = backward_chunk(backward_ops[weights++]);
    order.push_back({false, c, next_w[c]++, BackwardPass::weight});
  };
  for (int op = 0; op < ops; ++op) {
    if (op < total) {  // a forward (warm-up or steady)
      const int c = forward_chunk(op);
      order.push_back({true, c, next_f[c]++});
    }
    if (op >= warmup) {  // a B pass (steady or cool-down)
      const int c = backward_chunk(op);
      order.push_back({false, c, next_b[c]++, BackwardPass::input});
      backward_ops.push_back(op);
      if (op - warmup >= stage) weight();
    }
  }
  while (weights < static_cast<int>(backward_ops.size())) weight();
  return order;
}

// PyTorch's ScheduleZBVZeroBubble (the paper's ZB-V, §6): two chunks per rank in a V, chunk 0
// the rank's stage on the way down, chunk 1 its mirror on the way up (virtual_stage). It plans
// max(2·pp − 1, m) micro-batches and drops those past m.
std::vector<ScheduleItem> zbv(int pp, int stage, int microbatches) {
  const int planned = std::max(2 * pp - 1, microbatches);
  std::vector<ScheduleItem> order;
  order.reserve(6 * static_cast<std::size_t>(planned));
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto F = [&](int chunk) { order.push_back({true, chunk, chunk == 0 ? f0++ : f1++}); };
  auto B = [&](int chunk) {
    order.push_back({false, chunk, chunk == 0 ? b0++ : b1++, BackwardPass::input});
  };
  auto W = [&](int chunk, int mb) { order.push_back({false, chunk, mb, BackwardPass::weight}); };
  for (int i = 0; i < 2 * (pp - stage) - 1; ++i) F(0);
  for (int i = 0; i < stage; ++i) {
    F(1);
    F(0);
  }
  for (int i = 0; i < pp - stage; ++i) {
    F(1);
    B(1);
    W(1, b1 - 1);
  }
  while (f1 < f0 || f0 < planned) {
    if (f0 < planned) F(0);
    B(0);
    W(0, b0 - 1);
    F(1);
    B(1);
    W(1, b1 - 1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < stage; ++i) {
    B(0);
    B(1);
  }
  for (int i = 0; i < pp - stage; ++i) {
    B(0);
    W(0, w0++);
  }
  while (w1 < b1) W(1, w1++);
  while (w0 < b0) W(0, w0++);
  std::erase_if(order, [&](const ScheduleItem& it) { return it.microbatch >= microbatches; });
  return order;
}

// PyTorch's ScheduleDualPipeV (DeepSeek's DualPipeV, the V of DualPipe with one copy of the
// parameters), chunks as zbv's: forwards down chunk 0, then both chunks; B passes of chunk 1
// each followed by the oldest pending W; the steady state in pairs F(0)+B(1), F(1)+B(0) of
// different micro-batches with whole backwards (PyTorch's OVERLAP_F_B, whose two halves its
// runtime runs back to back unless a custom overlap function is registered); then whole
// backwards, switching to B passes half-way through the last ones (the odd and even ranks one
// chunk apart), and the pending Ws to end.
std::vector<ScheduleItem> dualpipev(int pp, int stage, int microbatches) {
  std::vector<ScheduleItem> order;
  order.reserve(6 * static_cast<std::size_t>(microbatches));
  int next_f[2] = {0, 0}, next_b[2] = {0, 0};
  std::vector<std::pair<int, int>> pending;  // (chunk, micro-batch) of Bs awaiting their W
  std::size_t next_pending = 0;
  auto F = [&](int c) { order.push_back({true, c, next_f[c]++}); };
  auto B = [&](int c, bool split) {
    order.push_back({false, c, next_b[c], split ? BackwardPass::input : BackwardPass::full});
    if (split) pending.emplace_back(c, next_b[c]);
    ++next_b[c];
  };
  auto W = [&] {
    if (next_pending == pending.size()) return;
    const auto [c, mb] = pending[next_pending++];
    order.push_back({false, c, mb, BackwardPass::weight});
  };
  const int p = pp, r = stage;
  for (int i = 0; i < 2 * (p - r - 1); ++i) F(0);
  for (int i = 0; i < r + 1; ++i) {
    F(0);
    F(1);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    B(1, true);
    W();
    F(1);
  }
  for (int i = 0; i < microbatches - 2 * p + r + 1; ++i) {
    F(0);  // the last rank's first pair is not overlapped in PyTorch: the same order
    B(1, false);
    F(1);
    B(0, false);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    B(1, false);
    F(1);
    B(0, false);
  }
  bool split = false;
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) split = true;
    B(1, split);
    if (i == (r + 1) / 2 && r % 2 == 0) split = true;
    B(0, split);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    W();
    B(0, split);
  }
  for (int i = 0; i < r + 1; ++i) W();
  return order;
}

}  // namespace

int virtual_stage(scenario::Schedule schedule, int pp, int stage, int chunk) {
  if (scenario::v_shape(schedule)) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

std::pair<int, int> stage_chunk(scenario::Schedule schedule, int pp, int vs) {
  if (scenario::v_shape(schedule))
    return vs < pp ? std::pair{vs, 0} : std::pair{2 * pp - 1 - vs, 1};
  return {vs % pp, vs / pp};
}

std::vector<ScheduleItem> schedule_order(scenario::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches) {
  switch (schedule) {
    case scenario::Schedule::gpipe:
      return gpipe(microbatches);
    case scenario::Schedule::one_f_one_b:
      return one_f_one_b(pp, stage, microbatches);
    case scenario::Schedule::interleaved:
      return interleaved(pp, stage, chunks, microbatches);
    case scenario::Schedule::zb_h1:
      return zero_bubble_looped(pp, stage, 1, microbatches);
    case scenario::Schedule::interleaved_zb:
      return zero_bubble_looped(pp, stage, chunks, microbatches);
    case scenario::Schedule::zbv:
      return zbv(pp, stage, microbatches);
    case scenario::Schedule::dualpipev:
      return dualpipev(pp, stage, microbatches);
  }
  return {};
}

}  // namespace stratagem::workload
