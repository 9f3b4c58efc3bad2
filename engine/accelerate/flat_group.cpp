#include "engine/accelerate/flat_group.hpp"

#include <ATen/ATen.h>

#include "engine/comm/torch_compat.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

void FlatGroup::build(std::vector<at::Tensor> params_in, int world, int rank,
                      const c10::Device& device) {
  params = std::move(params_in);
  offsets.clear();
  numel = 0;
  at::ScalarType dtype = at::kFloat;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i == 0) dtype = params[i].scalar_type();
    if (params[i].scalar_type() != dtype) {
      throw SpecError("model",
                      "parameters of one bucket or FSDP unit (" + name + ") must share a dtype");
    }
    offsets.push_back(numel);
    numel += params[i].numel();
  }
  shard_numel = (numel + world - 1) / world;
  padded = shard_numel * world;
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  flat = at::zeros({padded}, opts);
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    at::Tensor view = slot(flat, i);
    view.copy_(params[i].detach());
    params[i].set_data(view);
  }
  grad = at::zeros({padded}, opts);
  shard = shard_of(flat, rank).clone();
  grad_shard = at::zeros({shard_numel}, opts);
  gathered = true;
}

at::Tensor FlatGroup::slot(const at::Tensor& buffer, std::size_t i) const {
  return buffer.narrow(0, offsets[i], params[i].numel()).view(params[i].sizes());
}

at::Tensor FlatGroup::shard_of(const at::Tensor& buffer, int rank) const {
  return buffer.narrow(0, static_cast<std::int64_t>(rank) * shard_numel, shard_numel);
}

void FlatGroup::free_full() {
  if (!gathered) return;
  comm::compat::resize_storage(flat, 0);
  gathered = false;
}

void FlatGroup::allocate_full() {
  if (gathered) return;
  comm::compat::resize_storage(flat, static_cast<std::size_t>(padded) * flat.element_size());
  gathered = true;
}

double FlatGroup::full_bytes() const {
  return static_cast<double>(padded) * static_cast<double>(flat.element_size());
}

double FlatGroup::shard_bytes() const {
  return static_cast<double>(shard_numel) * static_cast<double>(flat.element_size());
}

}  // namespace stratagem::accelerate
