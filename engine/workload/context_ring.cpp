#include "engine/workload/context_ring.hpp"

#include "engine/scenario/tensor_shapes.hpp"

namespace stratagem::workload {

double context_kv_bytes(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  const double tokens = static_cast<double>(s.training.seq_len) * st.micro_batch_size;
  return 2.0 * tokens * scenario::kv_dim(s.model) / st.tp *
         scenario::compute_param_bytes(st.precision);
}

std::vector<TpPiece> context_exchange(bool forward, double kv_bytes, scenario::DType dtype) {
  auto ring = [&](CollectiveKind kind) {
    TpPiece p;
    p.collective = true;
    p.group = PieceGroup::cp;
    p.alongside = true;
    p.kind = kind;
    p.bytes = kv_bytes;
    p.dtype = dtype;
    return p;
  };
  if (forward) return {ring(CollectiveKind::all_gather)};
  return {ring(CollectiveKind::all_gather), ring(CollectiveKind::reduce_scatter)};
}

}  // namespace stratagem::workload
