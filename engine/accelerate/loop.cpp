// Accelerate's training-loop semantics around the step (accelerator.hpp): the gradient
// state (when a backward syncs), no_sync and autocast scopes, fp16 unscaling and gradient
// clipping, the usage checks, gather_for_metrics, schedulers, full state dicts and
// free_memory. The step itself is in accelerator.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <ATen/ATen.h>

#include "engine/accelerate/accelerator.hpp"
#include "engine/accelerate/data_parallel.hpp"
#include "engine/comm/torch_compat.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

void set_seed(std::uint64_t seed, bool device_specific) {
  if (device_specific) seed += static_cast<std::uint64_t>(launch::read_dist_env().rank);
  torch::manual_seed(seed);  // the CPU generator and, where there is one, every GPU's
  std::srand(static_cast<unsigned>(seed));
}

// ---- scopes ----------------------------------------------------------------------------------

NoSyncGuard::NoSyncGuard(Accelerator& acc) : acc_(acc) { ++acc_.no_sync_depth_; }
NoSyncGuard::~NoSyncGuard() { --acc_.no_sync_depth_; }

AutocastGuard::AutocastGuard(Accelerator& acc, bool enabled) : acc_(acc), was_(acc.autocast_on_) {
  acc_.set_autocast(enabled);
}
AutocastGuard::~AutocastGuard() { acc_.set_autocast(was_); }

// ---- the gradient state ----------------------------------------------------------------------

bool Accelerator::end_of_dataloader() const {
  return observer_.active != nullptr && observer_.active->at_end();
}

bool Accelerator::next_backward_syncs() const {
  // Accelerate's GradientState: the accumulation's last micro-step, or the loader's last
  // batch (which also starts the next epoch's accumulation afresh); never inside no_sync.
  return no_sync_depth_ == 0 &&
         (cycle_ + 1 >= options_.gradient_accumulation_steps || end_of_dataloader());
}

bool Accelerator::decide_sync() {
  if (no_sync_depth_ > 0) return false;  // no_sync backwards are not accumulation steps
  const bool sync = next_backward_syncs();
  cycle_ = sync ? 0 : cycle_ + 1;
  return sync;
}

bool Accelerator::sync_gradients() const {
  return backward_done_ ? sync_ : next_backward_syncs();
}

void Accelerator::check_usage(UsagePoint at) {
  if (!dp_) return;
  const char* where = at == UsagePoint::backward ? "backward" : "optimizer step";
  if (dp_->take_stray_backward()) {
    throw SpecError(where, "loss.backward() ran on the prepared model's loss: call "
                           "accelerator.backward(loss) instead (it scales the loss and syncs "
                           "the gradients of every process)");
  }
  if (dp_->sharded() && !optimizer_->original().state().empty()) {
    throw SpecError(where,
                    "the optimizer given to prepare() was stepped: step the one "
                    "prepare() returned (under " +
                        std::string(scenario::to_string(options_.sharding)) +
                        " it updates this process's shard and gathers the rest)");
  }
  if (at == UsagePoint::backward && !stepped_since_sync_ && !pipeline_) {
    throw SpecError(where, "a second backward after gradients were synced, with no step of "
                           "the prepared optimizer in between: call the optimizer prepare() "
                           "returned (opt->step()), not the original, and accumulate with "
                           "gradient_accumulation_steps or no_sync()");
  }
  // A training step some process has no batch for would leave the others waiting in the
  // gradient collectives (even_batches false with a loader that does not split evenly; with
  // even batches every process has as many).
  if (DataLoaderBase* l = observer_.active;
      l && at == UsagePoint::backward && !l->options().even_batches) {
    const std::int64_t batch = l->position().batch;
    for (int r = 0; r < env_.world_size; ++r) {
      if (l->size_of(r) < batch) {
        throw SpecError("even_batches", "process " + std::to_string(r) + " has " +
                                            std::to_string(l->size_of(r)) +
                                            " batches of this loader and process " +
                                            std::to_string(env_.rank) + " is training on batch " +
                                            std::to_string(batch) +
                                            ": train with even_batches (the default)");
      }
    }
  }
}

// ---- fp16 unscaling and clipping ---------------------------------------------------------------

bool Accelerator::unscale_gradients() {
  if (!scaler_) return false;
  if (unscaled_) return overflow_;
  bool overflow = dp_->found_inf();
  if (pipeline_ || options_.tp_size > 1) {
    // Each stage (TP rank) saw only its own gradients: every process skips if any overflowed.
    at::Tensor f = at::tensor({overflow ? 1.0 : 0.0}, at::kDouble).to(device_);
    comm_->all_reduce(f, comm::GroupSpec{}, comm::ReduceOp::max)->wait();
    overflow = f.cpu().item<double>() > 0;
  }
  if (!overflow) dp_->scale_grads(1.0 / scaler_->scale());
  unscaled_ = true;
  overflow_ = overflow;
  return overflow;
}

double Accelerator::clip_grad_norm_(double max_norm, double norm_type) {
  if (!dp_) throw SpecError("clip_grad_norm_", "call prepare() first");
  if (!(max_norm > 0) || !(norm_type > 0)) {
    throw SpecError("clip_grad_norm_", "max_norm and norm_type must be > 0");
  }
  if (!sync_ || stepped_since_sync_) {
    throw SpecError("clip_grad_norm_",
                    "call it after the backward that syncs gradients and before the step "
                    "(if (accelerator.sync_gradients()) ...): during accumulation the "
                    "gradients are partial");
  }
  if (options_.tp_size > 1) {
    throw SpecError("clip_grad_norm_",
                    "not with tensor parallelism yet (the replicated parameters' share of the "
                    "norm would count once per TP rank); clip_grad_value_ works");
  }
  set_autocast(false);
  if (unscale_gradients()) {
    set_autocast(true);
    return std::numeric_limits<double>::infinity();  // the step will be skipped
  }
  const bool inf_norm = std::isinf(norm_type);
  at::Tensor part = at::tensor({dp_->grad_norm_part(norm_type)}, at::kDouble).to(device_);
  comm_->all_reduce(part, comm::GroupSpec{}, inf_norm ? comm::ReduceOp::max : comm::ReduceOp::sum)
      ->wait();
  const double total = part.cpu().item<double>();
  const double norm = inf_norm ? total : std::pow(total, 1.0 / norm_type);
  // torch.nn.utils.clip_grad_norm_'s coefficient.
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) dp_->scale_grads(coef);
  set_autocast(true);
  return norm;
}

void Accelerator::clip_grad_value_(double clip_value) {
  if (!dp_) throw SpecError("clip_grad_value_", "call prepare() first");
  if (!(clip_value > 0)) throw SpecError("clip_grad_value_", "clip_value must be > 0");
  if (!sync_ || stepped_since_sync_) {
    throw SpecError("clip_grad_value_",
                    "call it after the backward that syncs gradients and before the step");
  }
  if (unscale_gradients()) return;
  dp_->clamp_grads(clip_value);
}

// ---- gather_for_metrics ------------------------------------------------------------------------

at::Tensor Accelerator::gather_for_metrics(const at::Tensor& tensor) {
  DataLoaderBase* l = observer_.active;
  const int world = env_.world_size;
  if (!l || tensor.dim() == 0 || l->rows_of_last_batch(env_.rank).first != tensor.size(0)) {
    return gather(tensor);
  }
  // Every process's rows of this batch are known here (the sharding is deterministic): pad
  // to the largest, gather, keep each process's real rows in process order.
  std::vector<std::pair<std::int64_t, std::int64_t>> rows(static_cast<std::size_t>(world));
  std::int64_t most = 0;
  for (int r = 0; r < world; ++r) {
    rows[static_cast<std::size_t>(r)] = l->rows_of_last_batch(r);
    most = std::max(most, rows[static_cast<std::size_t>(r)].first);
  }
  at::Tensor t = tensor.detach().to(device_).contiguous();
  if (t.size(0) < most) {
    std::vector<std::int64_t> pad_shape(t.sizes().begin(), t.sizes().end());
    pad_shape[0] = most - t.size(0);
    t = at::cat({t, at::zeros(pad_shape, t.options())});
  }
  const at::Tensor all = gather(t);  // [world · most, ...]
  std::vector<at::Tensor> keep;
  for (int r = 0; r < world; ++r) {
    const std::int64_t real = rows[static_cast<std::size_t>(r)].second;
    if (real > 0) keep.push_back(all.narrow(0, r * most, real));
  }
  if (keep.empty()) return all.narrow(0, 0, 0);
  return at::cat(keep);
}

// ---- schedulers, state dicts, free_memory ------------------------------------------------------

std::shared_ptr<AcceleratedScheduler> Accelerator::prepare_scheduler(
    std::shared_ptr<torch::optim::LRScheduler> scheduler) {
  if (!scheduler) throw SpecError("prepare_scheduler", "the scheduler is null");
  if (!optimizer_) throw SpecError("prepare_scheduler", "prepare the model and optimizer first");
  for (const auto& s : schedulers_) {
    if (&s->scheduler() == scheduler.get()) {
      throw SpecError("prepare_scheduler", "this scheduler was prepared already");
    }
  }
  // As Accelerate without split_batches: one scheduler step per data-parallel replica.
  const int replicas = options_.split_batches ? 1 : env_.world_size / options_.pipeline_stages;
  schedulers_.push_back(std::make_shared<AcceleratedScheduler>(*this, std::move(scheduler),
                                                               std::max(1, replicas)));
  return schedulers_.back();
}

std::vector<std::pair<std::string, at::Tensor>> Accelerator::get_state_dict() {
  if (!model_) throw SpecError("get_state_dict", "call prepare() first");
  if (pipeline_) throw SpecError("get_state_dict", "a pipeline's stages hold different layers");
  at::NoGradGuard no_grad;
  // The parameters are views of flat buffers; sharded strategies gather them after every
  // step, and FULL_SHARD units a forward freed are gathered here.
  if (dp_->fsdp()) dp_->gather_units();
  // Tensor-parallel layers: their whole weights (an all-gather over the TP group).
  std::map<std::string, at::Tensor> whole;
  for (const auto& m : model_->named_modules("", false)) {
    auto* linear = dynamic_cast<ParallelLinearImpl*>(m.value().get());
    if (!linear || !linear->sharded()) continue;
    for (auto& [name, t] : linear->full_parameters()) whole[m.key() + "." + name] = t;
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& p : model_->named_parameters()) {
    auto it = whole.find(p.key());
    const at::Tensor& t = it != whole.end() ? it->second : p.value();
    out.emplace_back(p.key(), t.detach().to(at::kCPU).clone());
  }
  for (auto& b : model_->named_buffers()) out.emplace_back(b.key(), b.value().to(at::kCPU).clone());
  comm_->barrier(comm::GroupSpec{});
  return out;
}

void Accelerator::free_memory() {
  measurer_.disarm();
  set_autocast(false);
  schedulers_.clear();
  optimizer_.reset();
  if (dp_) dp_->release();
  dp_.reset();
  pipeline_.reset();
  solo_.reset();
  for (DataLoaderBase* l : loaders_) l->shard(0, 1, false, true, nullptr);
  loaders_.clear();
  loader_names_.clear();
  loader_ = nullptr;
  observer_.active = nullptr;
  model_ = nullptr;
  micro_step_ = cycle_ = 0;
  sync_ = stepped_since_sync_ = true;
  backward_done_ = unscaled_ = overflow_ = skipped_ = false;
  save_extra_.clear();
  load_extra_.clear();
}

}  // namespace stratagem::accelerate
