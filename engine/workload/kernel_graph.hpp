#pragma once
// A block's work as a graph of framework ops over tensors, lowered to the kernels a stack
// launches:
//   eager    each op its own kernel, reading its inputs and writing its outputs through HBM
//            (PyTorch's eager mode, and the hand-fused kernels of Megatron and Transformer
//            Engine, which the graph then lists op by op);
//   fused    as torch.compile's Inductor does (torch/_inductor/scheduler.py): the pointwise and
//            reduction ops between two library kernels (GEMMs, attention) fuse along the
//            tensors they pass each other or both read (Inductor fuses for shared reads too,
//            scheduler.py score_fusion_memory); each connected chain becomes one kernel that reads
//            what it takes from outside once and writes only the tensors used after it or
//            saved for backward (`keep`). Library kernels stay as they are.
#include <string>
#include <vector>

#include "engine/scenario/cluster.hpp"

namespace stratagem::workload {

enum class KernelKind { gemm, attention, memory };
const char* to_string(KernelKind k);

/// One kernel launch.
struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::memory;
  double m = 0, n = 0, k = 0;                     ///< gemm: an m×k by k×n product
  scenario::DType dtype = scenario::DType::bf16;  ///< gemm, attention: the dtype it computes in
  double flops = 0;  ///< gemm: 2·m·n·k; attention: the FLOPs it executes (causal: half)
  double bytes = 0;  ///< HBM bytes read + written (gemm: its operands and output once)
  // attention: the fused kernel's shape, for the GPU's attention curves
  double head_dim = 0, seq = 0;
  bool causal = false;
  bool backward = false;
  /// A GEMM computing a weight's gradient (dyᵀ·x): what a zero-bubble schedule's W pass runs.
  bool weight_gradient = false;
  /// Which part of its block the kernel belongs to (kernels.hpp BlockPart), for the plan's
  /// chains that communicate between parts.
  int part = 0;
};

class OpGraph {
 public:
  /// A new tensor of `elements` elements of `element_bytes` bytes; returns its id. A
  /// `constant` (a weight, a RoPE table) is broadcast into the ops that read it: sharing it
  /// does not make two ops one kernel.
  int tensor(double elements, double element_bytes, bool constant = false);
  double bytes(int tensor) const { return tensors_.at(tensor).bytes; }
  /// Bytes of the kept tensors (keep) made while part `part` was set.
  double kept_bytes(int part) const;
  /// A memory-bound op (pointwise, reduction, copy) reading `in` and writing `out`.
  void op(std::string name, std::vector<int> in, std::vector<int> out);
  /// An m×k by k×n GEMM reading `a` (m×k) and `b` (k×n), writing `c` (m×n); `count` > 1: a
  /// grouped GEMM of that many such products in one launch (`a`, `b`, `c` all of them).
  void gemm(std::string name, double m, double n, double k, scenario::DType dtype, int a, int b,
            int c, double count = 1);
  /// Marks the GEMM added last as a weight-gradient GEMM (Kernel::weight_gradient).
  void weight_gradient() { nodes_.back().kernel.weight_gradient = true; }
  /// A fused attention kernel (`k` gives its FLOPs and shape; bytes are its tensors').
  void attention(Kernel k, std::vector<int> in, std::vector<int> out);
  /// The tensor outlives the graph (saved for backward, the block's output, sent to another
  /// rank): a fused kernel that produces it writes it to HBM.
  void keep(int tensor);
  /// Tags the ops added from now on as part `part` of the block (Kernel::part).
  void part(int part) { part_ = part; }

  std::vector<Kernel> eager() const;
  std::vector<Kernel> fused() const;

 private:
  struct Tensor {
    double bytes = 0;
    bool kept = false;
    bool constant = false;
    int part = 0;
  };
  struct Node {
    Kernel kernel;
    std::vector<int> in, out;
  };
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  int part_ = 0;
};

}  // namespace stratagem::workload
