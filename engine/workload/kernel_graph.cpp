#include "engine/workload/kernel_graph.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

namespace stratagem::workload {

const char* to_string(KernelKind k) {
  switch (k) {
    case KernelKind::gemm:
      return "gemm";
    case KernelKind::attention:
      return "attention";
    case KernelKind::memory:
      break;
  }
  return "memory";
}

int OpGraph::tensor(double elements, double element_bytes, bool constant) {
  tensors_.push_back({elements * element_bytes, false, constant, part_});
  return static_cast<int>(tensors_.size()) - 1;
}

double OpGraph::kept_bytes(int part) const {
  double bytes = 0;
  for (const Tensor& t : tensors_) {
    if (t.kept && t.part == part) bytes += t.bytes;
  }
  return bytes;
}

void OpGraph::keep(int tensor) {
  tensors_.at(tensor).kept = true;
}

void OpGraph::op(std::string name, std::vector<int> in, std::vector<int> out) {
  Node n;
  n.kernel.name = std::move(name);
  n.kernel.kind = KernelKind::memory;
  n.kernel.part = part_;
  n.in = std::move(in);
  n.out = std::move(out);
  nodes_.push_back(std::move(n));
}

void OpGraph::gemm(std::string name, double m, double n, double k, scenario::DType dtype, int a,
                   int b, int c, double count) {
  Node node;
  node.kernel.name = std::move(name);
  node.kernel.kind = KernelKind::gemm;
  node.kernel.m = m;
  node.kernel.n = n;
  node.kernel.k = k;
  node.kernel.dtype = dtype;
  node.kernel.flops = count == 1 ? 2.0 * m * n * k : count * 2.0 * m * n * k;
  node.kernel.part = part_;
  node.in = {a, b};
  node.out = {c};
  nodes_.push_back(std::move(node));
}

void OpGraph::attention(Kernel k, std::vector<int> in, std::vector<int> out) {
  Node n;
  n.kernel = std::move(k);
  n.kernel.kind = KernelKind::attention;
  n.kernel.part = part_;
  n.in = std::move(in);
  n.out = std::move(out);
  nodes_.push_back(std::move(n));
}

std::vector<Kernel> OpGraph::eager() const {
  std::vector<Kernel> out;
  out.reserve(nodes_.size());
  for (const Node& n : nodes_) {
    Kernel k = n.kernel;
    k.bytes = 0;
    for (int t : n.in) k.bytes += tensors_[t].bytes;
    for (int t : n.out) k.bytes += tensors_[t].bytes;
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<Kernel> OpGraph::fused() const {
  std::vector<Kernel> out;
  const int count = static_cast<int>(nodes_.size());
  // Which node reads each tensor (to know whether a tensor is used after a fused run).
  std::vector<std::vector<int>> readers(tensors_.size());
  for (int i = 0; i < count; ++i) {
    for (int t : nodes_[i].in) readers[t].push_back(i);
  }
  int i = 0;
  while (i < count) {
    if (nodes_[i].kernel.kind != KernelKind::memory) {
      Kernel k = nodes_[i].kernel;
      k.bytes = 0;
      for (int t : nodes_[i].in) k.bytes += tensors_[t].bytes;
      for (int t : nodes_[i].out) k.bytes += tensors_[t].bytes;
      out.push_back(std::move(k));
      ++i;
      continue;
    }
    // The run of memory-bound nodes [i, j), split into chains joined by the tensors one
    // node writes and another reads (union-find over the run's nodes).
    int j = i;
    while (j < count && nodes_[j].kernel.kind == KernelKind::memory) ++j;
    std::vector<int> parent(j - i);
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int a) {
      while (parent[a] != a) a = parent[a] = parent[parent[a]];
      return a;
    };
    std::vector<int> writer(tensors_.size(), -1), first_reader(tensors_.size(), -1);
    for (int a = i; a < j; ++a) {
      for (int t : nodes_[a].in) {
        if (writer[t] >= 0) parent[find(a - i)] = find(writer[t] - i);
        if (tensors_[t].constant) continue;
        if (first_reader[t] >= 0)
          parent[find(a - i)] = find(first_reader[t] - i);
        else
          first_reader[t] = a;
      }
      for (int t : nodes_[a].out) writer[t] = a;
    }
    // One kernel per chain, in the order of its first node.
    std::vector<int> roots;
    for (int a = i; a < j; ++a) {
      const int r = find(a - i);
      if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
    }
    for (int r : roots) {
      Kernel k;
      k.kind = KernelKind::memory;
      std::set<int> read, written;
      for (int a = i; a < j; ++a) {
        if (find(a - i) != r) continue;
        if (k.name.empty()) {
          k.part = nodes_[a].kernel.part;  // the chain's first node's
        } else {
          k.name += '+';
        }
        k.name += nodes_[a].kernel.name;
        for (int t : nodes_[a].in) {
          if (writer[t] < i || writer[t] >= j) read.insert(t);  // from outside the run
        }
        for (int t : nodes_[a].out) written.insert(t);
      }
      for (int t : read) k.bytes += tensors_[t].bytes;
      for (int t : written) {
        const bool used_after = std::any_of(readers[t].begin(), readers[t].end(),
                                            [&](int reader) { return reader >= j; });
        if (tensors_[t].kept || used_after) k.bytes += tensors_[t].bytes;
      }
      out.push_back(std::move(k));
    }
    i = j;
  }
  return out;
}

}  // namespace stratagem::workload
