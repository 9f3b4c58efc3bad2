#include "engine/workload/gemm_mix.hpp"

#include <algorithm>

namespace stratagem::workload {

namespace {

void add(GemmMix& mix, const GemmShape& g) {
  const auto same = std::find_if(mix.begin(), mix.end(), [&](const GemmShape& x) {
    return x.m == g.m && x.n == g.n && x.k == g.k && x.wide == g.wide;
  });
  if (same == mix.end()) {
    mix.push_back(g);
  } else {
    same->flops += g.flops;
  }
}

GemmMixPtr finish(GemmMix mix) {
  if (mix.empty()) return nullptr;
  return std::make_shared<const GemmMix>(std::move(mix));
}

}  // namespace

GemmMixPtr gemm_mix(const std::vector<Kernel>& kernels, bool wide) {
  GemmMix mix;
  for (const Kernel& k : kernels) {
    if (k.kind == KernelKind::gemm) add(mix, {k.m, k.n, k.k, k.flops, wide});
  }
  return finish(std::move(mix));
}

GemmMixPtr gemm_mix(const std::vector<Kernel>& kernels, const std::vector<std::string>& names) {
  GemmMix mix;
  for (const Kernel& k : kernels) {
    if (k.kind == KernelKind::gemm && std::find(names.begin(), names.end(), k.name) != names.end())
      add(mix, {k.m, k.n, k.k, k.flops, false});
  }
  return finish(std::move(mix));
}

GemmMixPtr gemm_mix(GemmMix shapes) {
  GemmMix mix;
  for (const GemmShape& g : shapes) add(mix, g);
  return finish(std::move(mix));
}

GemmMixPtr merge(const std::vector<std::pair<GemmMixPtr, int>>& parts) {
  GemmMix mix;
  for (const auto& [part, count] : parts) {
    if (!part) continue;
    for (GemmShape g : *part) {
      g.flops *= count;
      add(mix, g);
    }
  }
  return finish(std::move(mix));
}

}  // namespace stratagem::workload
