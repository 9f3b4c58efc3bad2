#pragma once
// The parallelism mesh of a scenario checked in one place, as torchtitan's ParallelDims does:
// world = dp × tp × cp × pp must equal the cluster's GPUs (computed without overflow), and each
// axis must fit the model and the cluster:
//  * tp divides heads, kv_heads (each rank holds whole GQA groups), ffn_hidden and
//    gpus_per_node or the NVLink domain (NVL72) (a TP group spanning nodes would put two all-reduces per block per
//    direction on the inter-node links, an order of magnitude slower than NVLink, so it is
//    refused, as Megatron-LM's users keep TP inside a node);
//  * tp needs the model's transformer shape (a quick-form or measured model has no heads or
//    MLP to split);
//  * sequence_parallel needs tp > 1 and seq_len divisible by tp;
//  * cp (context parallelism) needs the transformer shape and seq_len divisible by 2·cp (the
//    causal load-balancing split), and by 2·cp·tp with sequence parallelism;
//  * fp8 needs a GPU with an fp8 peak;
//  * HYBRID_SHARD needs at least two data-parallel ranks of a TP rank per node to shard over.
// Each violation is one SpecError naming the key's JSON path.
#include "engine/spec/scenario.hpp"

namespace stratagem::spec {

void validate_mesh(const Scenario& s);

}  // namespace stratagem::spec
