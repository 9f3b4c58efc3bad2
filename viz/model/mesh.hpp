#pragma once
// The device mesh of a result, as the timeline names it: each rank's coordinate (pipeline
// stage, data-, context- and tensor-parallel index, node) as the result records it, and the
// tensor-parallel group it belongs to. Ranks follow the one mesh order (scenario::MeshShape,
// tensor-parallel fastest, so a tensor-parallel group is contiguous). Tensor-parallel
// collectives are those on the `tp` stream or of purpose tensor_parallel (the SP
// norm-gradient all-reduce is the former).
#include <string>
#include <vector>

#include "engine/result/result.hpp"
#include "engine/scenario/parallel_dims.hpp"

namespace stratagem::viz {

struct MeshCoord {
  int stage = 0;
  int dp = 0;  ///< index in the data-parallel group
  int tp = 0;  ///< index in the tensor-parallel group
  int cp = 0;  ///< index in the context-parallel group
  int node = 0;
};

struct Mesh {
  int dp = 1, tp = 1, pp = 1, cp = 1;
  std::vector<MeshCoord> coords;  ///< per rank

  bool tensor_parallel() const { return tp > 1; }
  int rank_of(int stage, int dp_index, int tp_index = 0, int cp_index = 0) const {
    return scenario::MeshShape{dp, pp, tp, cp}.rank_of(stage, dp_index, tp_index, cp_index);
  }
};

/// The mesh of `r`: its recorded coordinates. A result written before results recorded the
/// tensor- and context-parallel index (all 0 where the scenario has tp or cp > 1) takes them
/// from the mesh order. When the scenario's dp × tp × cp × pp is not the result's number of
/// ranks (a hand-built result), the recorded coordinates with tp = 1.
Mesh mesh_of(const result::RunResult& r);

/// "rank 9 · stage 1 · dp 0 · tp 1" under tensor parallelism, "rank 9" otherwise.
std::string rank_label(const Mesh& mesh, int rank);
/// "tp(stage 1, dp 0)", the plan's name for the tensor-parallel group of `rank`.
std::string tp_group_label(const Mesh& mesh, int rank);
/// "ranks 8..15": the members of the tensor-parallel group of `rank` (contiguous).
std::string tp_group_ranks(const Mesh& mesh, int rank);

bool is_tensor_parallel(const result::Span& s);
/// A collective in one line: "all_reduce tensor_parallel over tp(stage 0, dp 0) · ranks 0..7"
/// for a tensor-parallel one on `rank`, "reduce_scatter grad_sync" otherwise.
std::string collective_summary(const Mesh& mesh, int rank, const result::Span& s);

}  // namespace stratagem::viz
