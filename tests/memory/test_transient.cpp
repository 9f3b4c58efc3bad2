// The transient walk: micro-batches in flight per schedule and stage (against the closed
// forms), recomputation, gathered parameters with prefetch, gradient buckets. Hand-made units
// so every expected number can be followed on paper.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/memory/transient.hpp"

namespace stratagem::memory {
namespace {

constexpr double kAct = 1000;  // bytes one unit keeps per micro-batch

StageTransientInput stage_input(scenario::Schedule schedule, int pp, int stage, int chunks, int m,
                                int units_per_chunk = 1) {
  StageTransientInput in;
  in.schedule = schedule;
  in.pp = pp;
  in.stage = stage;
  in.chunks = chunks;
  in.microbatches = m;
  in.chunk_units.assign(chunks, std::vector<UnitTransient>(units_per_chunk, {kAct, 0, 0, 0}));
  return in;
}

TEST(InFlight, GPipeHoldsEveryMicroBatchOnEveryStage) {
  for (int pp : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 16}) {
      for (int s = 0; s < pp; ++s) {
        const auto peak =
            stage_transient_peak(stage_input(scenario::Schedule::gpipe, pp, s, 1, m, 2));
        EXPECT_EQ(peak.max_in_flight, m) << "pp " << pp << " m " << m << " stage " << s;
        EXPECT_DOUBLE_EQ(peak.activations, m * 2 * kAct);
      }
    }
  }
}

TEST(InFlight, OneFOneBHoldsMinOfPMinusSAndM) {
  for (int pp : {1, 2, 4, 8}) {
    for (int m : {1, 2, 3, 8, 16}) {
      for (int s = 0; s < pp; ++s) {
        const auto peak =
            stage_transient_peak(stage_input(scenario::Schedule::one_f_one_b, pp, s, 1, m, 3));
        const int expected = std::min(pp - s, m);
        EXPECT_EQ(peak.max_in_flight, expected) << "pp " << pp << " m " << m << " stage " << s;
        EXPECT_DOUBLE_EQ(peak.activations, expected * 3 * kAct);
      }
    }
  }
}

TEST(InFlight, OneFOneBExamples) {
  // pp 4, m 8: stages hold 4, 3, 2, 1 micro-batches; m 2 caps the first stages at 2.
  const int expected8[] = {4, 3, 2, 1}, expected2[] = {2, 2, 2, 1};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(stage_transient_peak(stage_input(scenario::Schedule::one_f_one_b, 4, s, 1, 8))
                  .max_in_flight,
              expected8[s]);
    EXPECT_EQ(stage_transient_peak(stage_input(scenario::Schedule::one_f_one_b, 4, s, 1, 2))
                  .max_in_flight,
              expected2[s]);
  }
}

// Megatron-LM (schedules.py, interleaved): warm-up = (p−s−1)·2 + (v−1)·p forwards, all of
// them when m == p; one more forward runs before the first backward.
int megatron_interleaved_in_flight(int pp, int s, int v, int m) {
  const int total = m * v;
  if (m == pp) return total;
  const int warmup = std::min((pp - s - 1) * 2 + (v - 1) * pp, total);
  return std::min(warmup + 1, total);
}

TEST(InFlight, InterleavedMatchesMegatronWarmupPlusOne) {
  for (int pp : {2, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int m : {pp, 2 * pp, 4 * pp}) {
        for (int s = 0; s < pp; ++s) {
          const auto peak =
              stage_transient_peak(stage_input(scenario::Schedule::interleaved, pp, s, v, m));
          const int expected = megatron_interleaved_in_flight(pp, s, v, m);
          EXPECT_EQ(peak.max_in_flight, expected)
              << "pp " << pp << " v " << v << " m " << m << " stage " << s;
          EXPECT_DOUBLE_EQ(peak.activations, expected * kAct);
        }
      }
    }
  }
}

TEST(InFlight, InterleavedExamples) {
  // pp 4, v 2, m 8: warm-up 10, 8, 6, 4 → 11, 9, 7, 5 chunk-micro-batches of 16.
  const int expected[] = {11, 9, 7, 5};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(stage_transient_peak(stage_input(scenario::Schedule::interleaved, 4, s, 2, 8))
                  .max_in_flight,
              expected[s]);
  }
  // m == p: Megatron runs every forward first, so all m·v are in flight.
  EXPECT_EQ(
      stage_transient_peak(stage_input(scenario::Schedule::interleaved, 4, 3, 2, 4)).max_in_flight,
      8);
}

TEST(Recompute, OneUnitIsRebuiltAtATime) {
  // Three units keeping 2 bytes each, rebuilding 8 more each before their backward.
  auto in = stage_input(scenario::Schedule::one_f_one_b, 1, 0, 1, 1, 3);
  in.recompute = true;
  for (auto& u : in.chunk_units[0]) u = {2, 8, 0, 0};
  EXPECT_DOUBLE_EQ(stage_transient_peak(in).activations, 3 * 2 + 8);
  // pp 2, stage 0 holds 2 micro-batches when the first backward recomputes.
  in.pp = 2;
  in.microbatches = 4;
  EXPECT_DOUBLE_EQ(stage_transient_peak(in).activations, 2 * 3 * 2 + 8);
}

TEST(Recompute, SmallRebuildLeavesTheForwardPeak) {
  // The head keeps 10 and rebuilds nothing; blocks keep 2 and rebuild 3. After the head's
  // backward frees 10, rebuilding 3 never gets back to the forward's 14.
  auto in = stage_input(scenario::Schedule::one_f_one_b, 1, 0, 1, 1, 3);
  in.recompute = true;
  in.chunk_units[0] = {{2, 3, 0, 0}, {2, 3, 0, 0}, {10, 0, 0, 0}};
  EXPECT_DOUBLE_EQ(stage_transient_peak(in).activations, 14);
}

StageTransientInput sharded(bool reshard, int prefetch, scenario::Schedule schedule, int m) {
  StageTransientInput in;
  in.schedule = schedule;
  in.microbatches = m;
  in.params_sharded = true;
  in.reshard_after_forward = reshard;
  in.prefetch = prefetch;
  in.chunk_units = {{{0, 0, 10, 0}, {0, 0, 20, 0}, {0, 0, 40, 0}}};
  return in;
}

TEST(Gathered, ReshardKeepsThePrefetchWindow) {
  // Gathers run F: 10, 20, 40 then B: 40, 20, 10. While the last unit's forward runs, its own
  // gather and the first backward gather (the same unit again) are live: 80.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(true, 1, scenario::Schedule::one_f_one_b, 1)).gathered_params,
      80);
  // No prefetch: one unit at a time.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(true, 0, scenario::Schedule::one_f_one_b, 1)).gathered_params,
      40);
  // Prefetch 2: three consecutive gathers, at most 20 + 40 + 40.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(true, 2, scenario::Schedule::one_f_one_b, 1)).gathered_params,
      100);
  // More micro-batches repeat the window; they do not add to it.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(true, 1, scenario::Schedule::one_f_one_b, 5)).gathered_params,
      80);
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(true, 1, scenario::Schedule::gpipe, 5)).gathered_params, 80);
}

TEST(Gathered, ShardGradOpKeepsEachForwardsGatherUntilItsBackward) {
  // One micro-batch: the forward keeps 10 + 20 + 40 until the backward frees them.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(false, 1, scenario::Schedule::one_f_one_b, 1)).gathered_params,
      70);
  // GPipe: every forward gathers and keeps (as the plan builder emits it), so m micro-batches
  // hold m copies until their backwards.
  for (int m : {1, 2, 6}) {
    EXPECT_DOUBLE_EQ(
        stage_transient_peak(sharded(false, 1, scenario::Schedule::gpipe, m)).gathered_params,
        70.0 * m);
  }
}

TEST(Gathered, ShardGradOpPrefetchesTheNextForwardDuringBackward) {
  // 1F1B, m 2: gathers F0 10, 20, 40 then F1 10, 20, 40; B0 consumes none. Gather k waits for
  // the op that used gather k − prefetch − 1, so F1's first two (10, 20) may run once F0's
  // units 0 and 1 are done: during B0, 70 kept + 30 prefetched.
  for (int m : {2, 6}) {
    EXPECT_DOUBLE_EQ(
        stage_transient_peak(sharded(false, 1, scenario::Schedule::one_f_one_b, m)).gathered_params,
        100);
  }
  // Prefetch 2: all three of F1's gathers run during B0.
  EXPECT_DOUBLE_EQ(
      stage_transient_peak(sharded(false, 2, scenario::Schedule::one_f_one_b, 2)).gathered_params,
      140);
}

TEST(Gathered, UnitsWithoutParametersStillTakeAGatherSlot) {
  // A unit with no parameters is gathered (0 bytes) like the others, so it uses one of the
  // prefetch places: while unit 0 computes, only unit 1's (empty) gather runs ahead.
  StageTransientInput in = sharded(true, 1, scenario::Schedule::one_f_one_b, 1);
  in.chunk_units = {{{0, 0, 50, 0}, {0, 0, 0, 0}, {0, 0, 30, 0}}};
  // F: 50+0, 0+30, 30+30 (B's first gather) → 60; B: 30+0, 0+50, 50.
  EXPECT_DOUBLE_EQ(stage_transient_peak(in).gathered_params, 60);
}

TEST(Buckets, OneBucketLiveAtATimeAndCarriedIntoTheNextOp) {
  // Units (act, bucket): (0, 500), (100, 30), (100, 30).
  StageTransientInput in;
  in.schedule = scenario::Schedule::one_f_one_b;
  in.microbatches = 2;
  in.grads_sharded = true;
  in.bucket_cap_bytes = 0;  // every unit closes its own bucket
  in.chunk_units = {{{0, 0, 0, 500}, {100, 0, 0, 30}, {100, 0, 0, 30}}};
  // 1F1B: the first unit's 500-byte bucket, staged at the end of the backward, outlives the
  // activations (all freed by then) and overlaps the next forward.
  auto peak = stage_transient_peak(in);
  EXPECT_DOUBLE_EQ(peak.total(), 500);
  EXPECT_DOUBLE_EQ(peak.comm_buckets, 500);
  EXPECT_DOUBLE_EQ(peak.activations, 0);
  // GPipe: B0's last bucket is still being reduced when B1 starts with 200 bytes held.
  in.schedule = scenario::Schedule::gpipe;
  peak = stage_transient_peak(in);
  EXPECT_DOUBLE_EQ(peak.total(), 700);
  EXPECT_DOUBLE_EQ(peak.activations, 200);
  EXPECT_DOUBLE_EQ(peak.comm_buckets, 500);
}

TEST(Buckets, WithoutPrefetchASmallerReduceScatterEndsBeforeTheNextGather) {
  // ZeRO-3, prefetch 0, one micro-batch. Units (act, rebuilt, gather, bucket): (0, 0, 10, 10),
  // (100, 100, 50, 50), (5, 0, 20, b). When unit 2's backward ends, its bucket's reduce-scatter
  // and unit 1's gather start together; unit 1's recompute waits for the gather.
  auto walk = [](double last_bucket) {
    StageTransientInput in;
    in.params_sharded = true;
    in.grads_sharded = true;
    in.recompute = true;
    in.prefetch = 0;
    in.chunk_units = {{{0, 0, 10, 10}, {100, 100, 50, 50}, {5, 0, 20, last_bucket}}};
    return stage_transient_peak(in);
  };
  // b = 40 < 50: the reduce-scatter has finished when unit 1 recomputes: 100 + 100 + 50.
  auto peak = walk(40);
  EXPECT_DOUBLE_EQ(peak.total(), 250);
  EXPECT_DOUBLE_EQ(peak.comm_buckets, 0);
  // b = 60 > 50: it is still running then: 100 + 100 + 50 + 60.
  peak = walk(60);
  EXPECT_DOUBLE_EQ(peak.total(), 310);
  EXPECT_DOUBLE_EQ(peak.comm_buckets, 60);
}

}  // namespace
}  // namespace stratagem::memory
