#pragma once
// Named strategy variants of one scenario, for `compare`: the same model, cluster and global
// batch trained with DDP, a ZeRO stage, FSDP or a pipeline schedule.
#include <optional>
#include <string>
#include <vector>

#include "engine/scenario/scenario.hpp"

namespace stratagem::tune {

struct Variant {
  std::string name;
  std::optional<scenario::Scenario> scenario;  ///< empty when the variant is invalid here
  std::string error;                           ///< why it is invalid
};

/// Names accepted by compare: base (the scenario as written), ddp, zero1, zero2, zero3, fsdp
/// (FULL_SHARD), shard_grad_op, hybrid (HYBRID_SHARD), gpipe, 1f1b, interleaved, offload,
/// tp (Megatron tensor parallelism over the node with sequence parallelism, data-parallel
/// across nodes, keeping the base's sharding) and 3d (that TP × a 1F1B pipeline × data
/// parallelism, ZeRO-1 if the base shards), cp (FSDP over dp × cp with ring attention, the
/// smallest context-parallel degree that fits, as torchtitan's long-context runs), fp8 (the
/// base with mixed_precision fp8), moe-ep and moe-3d (expert parallelism), zb-h1, zbv and
/// dualpipev (the zero-bubble schedules on the pipeline gpipe/1f1b/interleaved use). Every other
/// variant has tp = cp = 1.
const std::vector<std::string>& variant_names();
/// The default list for `compare` without --strategies.
std::vector<std::string> default_variants();
/// Builds each variant; unknown names throw SpecError (path "--strategies").
std::vector<Variant> make_variants(const scenario::Scenario& base,
                                   const std::vector<std::string>& names);

}  // namespace stratagem::tune
