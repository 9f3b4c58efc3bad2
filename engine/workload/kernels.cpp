#include "engine/workload/kernels.hpp"

#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/workload/block_graphs.hpp"

namespace stratagem::workload {

Shape shape_of(const scenario::Scenario& s, scenario::BlockKind kind) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  if (m.measured || m.params_given > 0) {
    throw SpecError("model",
                    "a kernel list needs the model's shape (hidden, heads, ffn_hidden); "
                    "the quick and measured forms have none");
  }
  Shape x;
  const double t = st.tp;
  x.n = static_cast<double>(st.micro_batch_size) * static_cast<double>(s.training.seq_len) / st.cp;
  x.sp = st.sequence_parallel && st.tp > 1;
  x.nr = x.sp ? x.n / t : x.n;
  x.h = static_cast<double>(m.hidden);
  x.heads = static_cast<double>(m.heads) / t;
  x.d = static_cast<double>(scenario::attention_head_dim(m));  // h / heads unless head_dim
  x.q = x.heads * x.d;
  x.kv = scenario::kv_dim(m) / t;
  x.f = static_cast<double>(m.ffn_hidden) / t;
  x.seq = static_cast<double>(s.training.seq_len);
  x.causal = m.kind == scenario::ModelKind::decoder;
  x.flash = st.attention == scenario::Attention::flash;
  x.swiglu = m.mlp == scenario::MlpKind::swiglu;
  x.rms = m.norm == scenario::NormKind::rmsnorm;
  x.rotary = m.positions == scenario::PositionKind::rotary;
  x.qk_norm = m.qk_norm;
  x.e = st.precision == scenario::Precision::no ? 4.0 : 2.0;
  x.dtype = scenario::gemm_dtype(st);
  x.fp8 = x.dtype == DType::fp8;
  x.recipe = st.fp8_recipe;
  if (kind == scenario::BlockKind::moe && m.moe) {
    const scenario::MoeSpec& moe = *m.moe;
    const scenario::ExpertRankLoad load = scenario::expert_rank_load(s, x.e);
    x.moe_block = true;
    x.moe.experts = static_cast<double>(moe.experts);
    x.moe.top_k = static_cast<double>(moe.top_k);
    x.moe.local = static_cast<double>(load.local_experts);
    x.moe.rows = load.expert_gemm_rows;
    x.moe.routed = load.routed;
    x.moe.f = static_cast<double>(moe.expert_ffn_hidden) / st.etp;
    x.moe.shared_f =
        static_cast<double>(moe.shared_experts) * static_cast<double>(moe.shared_expert_ffn_hidden);
    x.moe.sigmoid = moe.router == scenario::RouterKind::sigmoid_bias;
    x.moe.dispatched = st.ep * st.etp > 1;
  }
  return x;
}

BlockKernels block_kernels(const scenario::Scenario& s, scenario::BlockKind kind) {
  const Shape x = shape_of(s, kind);
  const bool compile = s.strategy.compile && scenario::eager_modules(s.strategy.stack);
  return BlockGraphs(x, s.strategy.stack, compile).build();
}

KernelTotals totals(const std::vector<Kernel>& kernels) {
  KernelTotals t;
  for (const Kernel& k : kernels) {
    switch (k.kind) {
      case KernelKind::gemm:
        t.gemm_flops += k.flops;
        t.gemm_bytes += k.bytes;
        break;
      case KernelKind::attention:
        t.attention_flops += k.flops;
        break;
      case KernelKind::memory:
        t.memory_bytes += k.bytes;
        break;
    }
    ++t.launches;
  }
  return t;
}

}  // namespace stratagem::workload
