#include "engine/accelerate/data_parallel.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include <ATen/ATen.h>
#include <torch/optim.h>

#include "engine/comm/torch_compat.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

using comm::ReduceOp;

bool same_memory(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes();
}

// Optimizer-state elements per parameter element, by the optimizer's type.
double state_factor(const torch::optim::Optimizer& o) {
  if (const auto* a = dynamic_cast<const torch::optim::Adam*>(&o)) {
    return static_cast<const torch::optim::AdamOptions&>(a->defaults()).amsgrad() ? 3 : 2;
  }
  if (const auto* a = dynamic_cast<const torch::optim::AdamW*>(&o)) {
    return static_cast<const torch::optim::AdamWOptions&>(a->defaults()).amsgrad() ? 3 : 2;
  }
  if (const auto* s = dynamic_cast<const torch::optim::SGD*>(&o)) {
    return static_cast<const torch::optim::SGDOptions&>(s->defaults()).momentum() > 0 ? 1 : 0;
  }
  return 1;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer_like(
    const torch::optim::Optimizer& like, std::vector<torch::optim::OptimizerParamGroup> groups) {
  using namespace torch::optim;
  if (const auto* o = dynamic_cast<const AdamW*>(&like)) {
    return std::make_unique<AdamW>(groups, static_cast<const AdamWOptions&>(o->defaults()));
  }
  if (const auto* o = dynamic_cast<const Adam*>(&like)) {
    return std::make_unique<Adam>(groups, static_cast<const AdamOptions&>(o->defaults()));
  }
  if (const auto* o = dynamic_cast<const SGD*>(&like)) {
    return std::make_unique<SGD>(groups, static_cast<const SGDOptions&>(o->defaults()));
  }
  if (const auto* o = dynamic_cast<const RMSprop*>(&like)) {
    return std::make_unique<RMSprop>(groups, static_cast<const RMSpropOptions&>(o->defaults()));
  }
  if (const auto* o = dynamic_cast<const Adagrad*>(&like)) {
    return std::make_unique<Adagrad>(groups, static_cast<const AdagradOptions&>(o->defaults()));
  }
  throw SpecError("optimizer",
                  "sharded strategies rebuild the optimizer over each rank's shard "
                  "and know Adam, AdamW, SGD, RMSprop and Adagrad; use one of them "
                  "or sharding ddp");
}

DataParallel::DataParallel(torch::nn::Module& model,
                           std::shared_ptr<torch::optim::Optimizer> user_optimizer,
                           comm::Communicator& comm, Tracer& tracer,
                           const AcceleratorOptions& options, c10::Device device,
                           comm::GroupSpec group)
    : model_(model),
      user_(std::move(user_optimizer)),
      comm_(comm),
      group_(std::move(group)),
      tracer_(tracer),
      options_(options),
      device_(device),
      sharding_(options.sharding),
      world_(group_.ranks.empty() ? comm.world_size() : static_cast<int>(group_.ranks.size())),
      rank_(group_.ranks.empty() ? comm.rank()
                                 : static_cast<int>(std::find(group_.ranks.begin(),
                                                              group_.ranks.end(), comm.rank()) -
                                                    group_.ranks.begin())),
      watcher_(std::make_unique<WorkWatcher>()) {
  using scenario::Sharding;
  fsdp_ = sharding_ == Sharding::fsdp_full_shard || sharding_ == Sharding::fsdp_shard_grad_op;
  sharded_ = sharding_ != Sharding::none;
  staged_ = sharding_ == Sharding::zero2 || fsdp_;
  if (sharding_ == Sharding::zero3 || sharding_ == Sharding::fsdp_hybrid_shard) {
    throw SpecError("sharding", std::string(scenario::to_string(sharding_)) +
                                    " is not available in the Accelerator (use FULL_SHARD)");
  }
  if (rank_ >= world_) throw SpecError("group", "this process is not in its data-parallel group");
  // Every process starts from the group's first rank's weights and buffers, as DDP does.
  {
    at::NoGradGuard no_grad;
    const int root = group_.ranks.empty() ? 0 : group_.ranks.front();
    for (auto& p : model_.parameters()) comm_.broadcast(p.detach(), root, group_)->wait();
    for (auto& b : model_.buffers()) comm_.broadcast(b.detach(), root, group_)->wait();
  }
  if (fsdp_) {
    build_units(model);
  } else {
    build_buckets(model);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      auto& p = groups_[g].params[i];
      if (!staged_) p.mutable_grad() = groups_[g].slot(groups_[g].grad, i);
      // The hooks outlive this object (autograd keeps them): after free_memory they do nothing.
      hooks_.push_back(comm::compat::add_post_accumulate_grad_hook(p, [this, alive = alive_, g, i] {
        if (*alive) on_grad(g, i);
      }));
    }
    if (staged_) groups_[g].grad = at::Tensor();  // allocated per backward
  }
  if (sharded_) {
    std::vector<torch::optim::OptimizerParamGroup> param_groups;
    for (auto& G : groups_) {
      G.shard.requires_grad_(true);
      G.shard.mutable_grad() = G.grad_shard;
      param_groups.emplace_back(std::vector<at::Tensor>{G.shard},
                                user_->param_groups()[G.param_group].options().clone());
    }
    inner_ = make_optimizer_like(*user_, std::move(param_groups));
  }
}

int DataParallel::param_group_of(const at::Tensor& p) const {
  const auto& groups = user_->param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& q : groups[g].params()) {
      if (q.unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) return static_cast<int>(g);
    }
  }
  return -1;
}

void DataParallel::build_buckets(torch::nn::Module& model) {
  // Reverse registration order approximates the order gradients become ready (PyTorch DDP).
  std::vector<at::Tensor> params;
  for (auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  std::reverse(params.begin(), params.end());
  const double cap = options_.bucket_mb * kBytesPerMiB;
  std::vector<at::Tensor> current;
  double bytes = 0;
  int current_group = -1;
  auto flush = [&] {
    if (current.empty()) return;
    FlatGroup G;
    G.name = "bucket " + std::to_string(groups_.size());
    G.param_group = current_group;
    G.build(std::move(current), world_, rank_, device_);
    groups_.push_back(std::move(G));
    current.clear();
    bytes = 0;
  };
  for (auto& p : params) {
    const int pg = param_group_of(p);
    if (pg < 0) {
      throw SpecError("optimizer",
                      "a parameter of the model that requires grad is not in the "
                      "optimizer; pass model->parameters() to it");
    }
    if (pg != current_group) flush();
    current_group = pg;
    current.push_back(p);
    bytes += static_cast<double>(p.nbytes());
    if (bytes >= cap) flush();
  }
  flush();
}

void DataParallel::before_backward(bool sync) {
  sync_ = sync;
  in_backward_ = true;
  for (auto& G : groups_) {
    G.ready = 0;
    G.launched = false;
    // FULL_SHARD after a no-sync micro-step or a forward without a step: make sure the
    // parameters are there for the backward (gathered right after the last step).
    if (fsdp_ && !G.gathered && !G.forward_managed) {
      throw RuntimeError("FSDP unit " + G.name +
                         " has no gathered parameters for this backward (two backwards over one "
                         "forward?)");
    }
  }
}

void DataParallel::on_grad(std::size_t g, std::size_t i) {
  if (!in_backward_) {
    stray_backward_ = true;  // a plain loss.backward(): reported at the next step
    return;
  }
  if (!sync_) return;  // accumulation: autograd keeps summing into .grad
  FlatGroup& G = groups_[g];
  at::Tensor& p = G.params[i];
  at::NoGradGuard no_grad;
  if (staged_) {
    if (!G.grad.defined()) G.grad = at::zeros({G.padded}, G.shard.options().requires_grad(false));
    if (p.grad().defined()) G.slot(G.grad, i).copy_(p.grad());
    p.mutable_grad() = at::Tensor();  // the gradient now lives in the staged bucket only
  } else {
    at::Tensor slot = G.slot(G.grad, i);
    if (p.grad().defined() && !same_memory(p.grad(), slot)) {
      slot.copy_(p.grad());
      p.mutable_grad() = slot;
    }
  }
  if (++G.ready == static_cast<int>(G.params.size())) launch(g);
}

void DataParallel::launch(std::size_t g) {
  FlatGroup& G = groups_[g];
  G.launched = true;
  if (options_.mixed_precision != scenario::Precision::no && G.grad.scalar_type() == at::kFloat) {
    // 16-bit gradients where parameters stay fp32: values round to fp16 / bf16 as they would
    // be communicated, and fp16 overflows to inf, which the loss scaler then sees.
    G.grad.copy_(G.grad.to(options_.mixed_precision == scenario::Precision::fp16 ? at::kHalf
                                                                                 : at::kBFloat16));
  }
  if (sharding_ == scenario::Sharding::fsdp_full_shard) {
    G.free_full();  // this backward is done with them
    tracer_.memory(memory());
  }
  int span = 0;
  if (!sharded_) {
    span = tracer_.begin(result::SpanKind::all_reduce, plan::Stream::collective, G.full_bytes(),
                         static_cast<int>(g));
    G.work = comm_.all_reduce(G.grad, group_, comm::ReduceOp::sum);
  } else {
    span = tracer_.begin(result::SpanKind::reduce_scatter, plan::Stream::collective, G.full_bytes(),
                         static_cast<int>(g));
    G.reduce_out = at::empty({G.shard_numel}, G.grad.options());
    G.work = comm_.reduce_scatter(G.reduce_out, G.grad, group_);
  }
  watcher_->push(G.work, [this, span] { tracer_.end(span); });
}

void DataParallel::after_backward() {
  in_backward_ = false;
  if (!sync_) return;
  at::NoGradGuard no_grad;
  // Buckets whose hooks did not all fire (parameters unused by this forward): in index
  // order, the same on every rank.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    FlatGroup& G = groups_[g];
    if (G.launched) continue;
    if (staged_ && !G.grad.defined())
      G.grad = at::zeros({G.padded}, G.shard.options().requires_grad(false));
    for (std::size_t i = 0; i < G.params.size(); ++i) {
      at::Tensor& p = G.params[i];
      at::Tensor slot = G.slot(G.grad, i);
      if (p.grad().defined() && !same_memory(p.grad(), slot)) slot.copy_(p.grad());
      if (staged_) {
        p.mutable_grad() = at::Tensor();
      } else {
        p.mutable_grad() = slot;
      }
    }
    launch(g);
  }
  watcher_->drain();
  const double inv_world = 1.0 / world_;
  for (auto& G : groups_) {
    if (!sharded_) {
      G.grad.mul_(inv_world);
    } else {
      G.grad_shard.copy_(G.reduce_out).mul_(inv_world);
      G.reduce_out = at::Tensor();
    }
    if (staged_) G.grad = at::Tensor();  // ZeRO-2 / FSDP keep only the shard
    if (sharding_ == scenario::Sharding::fsdp_shard_grad_op) G.free_full();
    G.work = nullptr;
  }
  tracer_.memory(memory());
}

bool DataParallel::found_inf() {
  at::Tensor flag = at::zeros({1}, at::TensorOptions().device(device_));
  for (auto& G : groups_) {
    const at::Tensor& g = sharded_ ? G.grad_shard : G.grad;
    if (g.defined())
      flag = at::maximum(flag, g.isfinite().logical_not().any().to(at::kFloat).reshape({1}));
  }
  comm_.all_reduce(flag, group_, comm::ReduceOp::max)->wait();
  return flag.item<float>() > 0;
}

void DataParallel::scale_grads(double factor) {
  if (factor == 1.0) return;
  at::NoGradGuard no_grad;
  for (auto& G : groups_) {
    at::Tensor& g = sharded_ ? G.grad_shard : G.grad;
    if (g.defined()) g.mul_(factor);
  }
}

void DataParallel::step() {
  if (!sharded_) {
    const int span = tracer_.begin(result::SpanKind::optimizer, plan::Stream::compute);
    user_->step();
    tracer_.end(span);
    return;
  }
  // The user may have changed learning rates (a scheduler): carry them to the shards'.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    inner_->param_groups()[g].options().set_lr(
        user_->param_groups()[groups_[g].param_group].options().get_lr());
  }
  const int span = tracer_.begin(result::SpanKind::optimizer, plan::Stream::compute);
  inner_->step();
  tracer_.end(span);
  gather_all();
}

void DataParallel::skip_step() {
  if (fsdp_) gather_all();
}

void DataParallel::gather_all() {
  at::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    FlatGroup& G = groups_[g];
    G.allocate_full();
    const int span =
        tracer_.begin(result::SpanKind::all_gather, plan::Stream::collective, G.full_bytes(),
                      static_cast<int>(g), plan::CommPurpose::param_gather);
    watcher_->push(comm_.all_gather(G.flat, G.shard.detach(), group_),
                   [this, span] { tracer_.end(span); });
  }
  watcher_->drain();
  tracer_.memory(memory());
}

void DataParallel::zero_grad() {
  at::NoGradGuard no_grad;
  for (auto& G : groups_) {
    if (staged_) {
      for (auto& p : G.params) p.mutable_grad() = at::Tensor();
    } else {
      G.grad.zero_();
    }
    G.grad_shard.zero_();
  }
  for (auto& p : model_.parameters()) {  // parameters outside the buckets (frozen ones)
    if (!p.requires_grad() && p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

torch::optim::Optimizer& DataParallel::stepping_optimizer() {
  return sharded_ ? *inner_ : *user_;
}

std::vector<std::pair<std::string, at::Tensor>> DataParallel::state_tensors() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (sharded_) {
      out.emplace_back("shard/" + std::to_string(g), groups_[g].shard);
    } else {
      out.emplace_back("flat/" + std::to_string(g), groups_[g].flat);
    }
  }
  for (auto& b : model_.named_buffers()) out.emplace_back("buffer/" + b.key(), b.value());
  for (auto& p : model_.named_parameters()) {
    if (!p.value().requires_grad()) out.emplace_back("frozen/" + p.key(), p.value());
  }
  return out;
}

void DataParallel::after_load() {
  if (sharded_) gather_all();
}

std::array<double, plan::kTensorClassCount> DataParallel::memory() const {
  std::array<double, plan::kTensorClassCount> m{};
  auto at_class = [&m](plan::TensorClass c) -> double& { return m[static_cast<int>(c)]; };
  for (const auto& G : groups_) {
    if (fsdp_) {
      at_class(plan::TensorClass::params) += G.shard_bytes();
      if (G.gathered) at_class(plan::TensorClass::gathered_params) += G.full_bytes();
    } else {
      at_class(plan::TensorClass::params) += G.full_bytes();
    }
    if (staged_) {
      if (G.grad.defined()) at_class(plan::TensorClass::comm_buckets) += G.full_bytes();
    } else {
      at_class(plan::TensorClass::grads) += G.full_bytes();
    }
    if (sharded_) at_class(plan::TensorClass::grads) += G.shard_bytes();
  }
  // Optimizer states: what the stepping optimizer has allocated so far.
  const torch::optim::Optimizer& o = sharded_ ? *inner_ : *user_;
  const double factor = state_factor(o);
  for (const auto& group : o.param_groups()) {
    for (const auto& p : group.params()) {
      const auto key = c10::guts::to_string(p.unsafeGetTensorImpl());
      if (o.state().count(key)) {
        at_class(plan::TensorClass::optimizer) += factor * static_cast<double>(p.nbytes());
      }
    }
  }
  return m;
}

}  // namespace stratagem::accelerate
