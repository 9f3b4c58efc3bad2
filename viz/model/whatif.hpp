#pragma once
// The what-if knobs: the strategy and hardware choices a user turns in the viewer, applied
// to a base scenario through the scenario format itself, so every edit is validated by the
// same rules as a file and an invalid combination comes back as the SpecError to show.
#include <string>

#include "engine/scenario/scenario.hpp"

namespace stratagem::viz {

struct WhatIf {
  int dp = 1;
  int tp = 1;                      ///< tensor-parallel degree (Megatron-LM)
  bool sequence_parallel = false;  ///< used when tp > 1
  int cp = 1;                      ///< context-parallel degree (ring attention)
  scenario::Attention attention = scenario::Attention::flash;
  int pp = 1;
  scenario::Schedule schedule = scenario::Schedule::one_f_one_b;
  int chunks = 2;  ///< virtual stages per rank, used by the interleaved schedule
  int micro_batches = 1;
  int micro_batch_size = 1;
  scenario::Sharding sharding = scenario::Sharding::none;
  scenario::Precision precision = scenario::Precision::no;
  scenario::Recompute recompute = scenario::Recompute::none;
  std::string gpu;      ///< GPU preset; "" keeps the scenario's GPU
  std::string cluster;  ///< cluster preset; "" keeps the scenario's cluster
  friend bool operator==(const WhatIf&, const WhatIf&) = default;
};

WhatIf what_if_of(const scenario::Scenario& s);

/// `base` with the knobs applied. The global batch follows the knobs (micro_batch_size ×
/// micro_batches × dp; tensor- and context-parallel peers share their micro-batches); the
/// number of nodes follows the world dp × tp × cp × pp when it is a whole number of the
/// cluster's nodes; fp8_all_gather is kept only while precision is fp8 and parameters shard. Sequence
/// parallelism applies only with tp > 1. Throws SpecError naming the offending key.
scenario::Scenario apply_what_if(const scenario::Scenario& base, const WhatIf& knobs);
/// dp × tp × cp × pp: the GPUs the knobs ask for.
int world_of(const WhatIf& knobs);

/// Sets one knob from text, as `--what-if key=value` gives it: dp, tp, sequence_parallel
/// (true/false), cp, attention, pp, schedule, chunks, micro_batches, micro_batch_size,
/// sharding, precision, recompute, gpu, cluster. Names are the scenario format's (1f1b, zero2, FULL_SHARD, bf16,
/// selective, ...).
void set_knob(WhatIf& knobs, const std::string& key, const std::string& value);
/// Applies "key=value,key=value".
void set_knobs(WhatIf& knobs, const std::string& assignments);

}  // namespace stratagem::viz
