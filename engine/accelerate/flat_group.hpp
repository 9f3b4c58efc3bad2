#pragma once
// A flat group: parameters of one gradient bucket (DDP, ZeRO-1/2) or one FSDP unit, laid out
// back to back in one buffer padded to a multiple of the world size, so that all-reduce,
// reduce-scatter and all-gather act on contiguous memory and rank r's shard is elements
// [r·k, (r+1)·k). The model's parameters become views of the buffer (their autograd identity
// is kept: set_data), so the user's module computes with it unchanged.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "engine/comm/communicator.hpp"

namespace stratagem::accelerate {

struct FlatGroup {
  std::string name;                   ///< "bucket 2", or the FSDP unit's module path
  int param_group = 0;                ///< the user optimizer's parameter group of its params
  std::vector<at::Tensor> params;     ///< the model's parameters, views of `flat`
  std::vector<std::int64_t> offsets;  ///< element offset of each parameter in `flat`
  std::int64_t numel = 0;             ///< parameters' elements
  std::int64_t padded = 0;            ///< numel rounded up to a multiple of the world size
  std::int64_t shard_numel = 0;       ///< padded / world
  at::Tensor flat;        ///< [padded] full parameters (FSDP: storage freed when resharded)
  at::Tensor grad;        ///< [padded] full gradients (resident, or staged for one backward)
  at::Tensor shard;       ///< [shard_numel] this rank's parameters (sharded strategies)
  at::Tensor grad_shard;  ///< [shard_numel] this rank's averaged gradients
  bool gathered = true;   ///< `flat` holds the full parameters now
  /// FSDP: the unit's module (identity only), and whether its forward runs through a
  /// gathering wrapper (it is an element of a torch::nn::Sequential).
  const void* module = nullptr;
  bool forward_managed = false;

  // One backward's progress (reset by the accelerator).
  int ready = 0;
  bool launched = false;
  at::Tensor reduce_out;  ///< reduce-scatter output in flight
  comm::WorkPtr work;

  /// Moves `params` (on `device`) into a new flat buffer and makes them views of it.
  void build(std::vector<at::Tensor> params_in, int world, int rank, const c10::Device& device);
  /// The view of parameter `i` in a flat buffer laid out like `flat`.
  at::Tensor slot(const at::Tensor& buffer, std::size_t i) const;
  /// Elements [rank·k, (rank+1)·k) of a buffer laid out like `flat`.
  at::Tensor shard_of(const at::Tensor& buffer, int rank) const;
  /// FSDP: frees the gathered parameters' memory (views stay, with no storage behind them).
  void free_full();
  /// FSDP: re-allocates the full buffer (contents undefined until gathered).
  void allocate_full();
  /// Bytes of a full buffer / a shard in the parameters' dtype.
  double full_bytes() const;
  double shard_bytes() const;
};

}  // namespace stratagem::accelerate
