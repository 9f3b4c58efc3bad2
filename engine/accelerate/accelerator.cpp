// The Accelerator's process side (environment, device, communicator, print/gather/reduce)
// and the training step around the user's backward and optimizer. State is in state.cpp,
// trace and export in report.cpp, the strategies in data_parallel.cpp.
#include "engine/accelerate/accelerator.hpp"

#include <algorithm>
#include <exception>

#include <ATen/ATen.h>

#include "engine/accelerate/data_parallel.hpp"
#include "engine/accelerate/trackers.hpp"
#include "engine/comm/inproc_communicator.hpp"
#include "engine/comm/torch_compat.hpp"
#include "engine/launch/heartbeat.hpp"
#include "engine/runtime/host_memory.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/parallel_dims.hpp"

namespace stratagem::accelerate {

namespace {

c10::Device pick_device(const AcceleratorOptions& o, const launch::DistEnv& env) {
  if (o.cpu || !torch::cuda::is_available()) return c10::Device(c10::kCPU);
  const int count = static_cast<int>(torch::cuda::device_count());
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % count));
}

}  // namespace

// ---- AcceleratedOptimizer, AccumulateGuard -------------------------------------------------

AcceleratedOptimizer::AcceleratedOptimizer(Accelerator& acc,
                                           std::shared_ptr<torch::optim::Optimizer> user)
    : torch::optim::Optimizer(user->param_groups(), user->defaults().clone()),
      acc_(acc),
      user_(std::move(user)) {
  for (auto& g : user_->param_groups()) initial_lrs_.push_back(g.options().get_lr());
  synced_lrs_ = initial_lrs_;
}

at::Tensor AcceleratedOptimizer::step(LossClosure closure) {
  if (closure) throw SpecError("optimizer", "step(closure) is not supported by the Accelerator");
  sync_learning_rates();
  acc_.optimizer_step();
  return {};
}

void AcceleratedOptimizer::sync_learning_rates() {
  // A scheduler built on this wrapper changes its groups, one built on the original
  // optimizer (as most are: before prepare) the original's. The sharded optimizer reads the
  // original's (DataParallel::step).
  auto& mine = param_groups_;
  auto& theirs = user_->param_groups();
  for (std::size_t g = 0; g < mine.size() && g < theirs.size(); ++g) {
    const double a = mine[g].options().get_lr(), b = theirs[g].options().get_lr();
    const double lr = a != synced_lrs_[g] ? a : b;
    mine[g].options().set_lr(lr);
    theirs[g].options().set_lr(lr);
    synced_lrs_[g] = lr;
  }
}

void AcceleratedOptimizer::reset_learning_rates() {
  for (std::size_t g = 0; g < param_groups_.size(); ++g) {
    param_groups_[g].options().set_lr(initial_lrs_[g]);
    user_->param_groups()[g].options().set_lr(initial_lrs_[g]);
    synced_lrs_[g] = initial_lrs_[g];
  }
}

void AcceleratedOptimizer::zero_grad() {
  acc_.optimizer_zero_grad();
}

torch::optim::Optimizer& AcceleratedOptimizer::inner() {
  return acc_.dp_->stepping_optimizer();
}

AccumulateGuard::AccumulateGuard(Accelerator& acc) : acc_(acc) {
  acc_.begin_micro_step();
}

AccumulateGuard::~AccumulateGuard() = default;

// ---- Accelerator -------------------------------------------------------------------------

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)),
      env_(launch::read_dist_env()),
      device_(pick_device(options_, env_)) {
  launch::Heartbeat::start_from_env();  // `stratagem launch` watches liveness through it
  launch::Heartbeat::progress("starting the Accelerator");
  comm::compat::set_library_log_level(!options_.debug);
  // On CPUs reuse freed blocks instead of fresh zeroed pages each step, as the workers do.
  if (device_.is_cpu()) runtime::keep_freed_host_memory();
  if (options_.seed) set_seed(*options_.seed);
  if (options_.gradient_accumulation_steps < 1) {
    throw SpecError("gradient_accumulation_steps", "must be >= 1");
  }
  if (env_.world_size == 1) {
    comm_ = std::move(comm::make_inproc_world(1, options_.timeout)[0]);
  } else {
    comm_ = comm::make_communicator(env_, device_.is_cuda() ? "nccl" : "gloo", options_.timeout);
  }
  if (options_.mixed_precision == scenario::Precision::fp16) {
    scaler_ = std::make_unique<runtime::DynamicLossScaler>(options_.loss_scale);
  }
  mark_s_ = tracer_.now();
}

Accelerator::~Accelerator() {
  measurer_.disarm();
  set_autocast(false);
  // The store lives on rank 0: let everyone finish before it goes. Not while unwinding (a
  // failing rank must exit, and the launcher then ends the others).
  if (std::uncaught_exceptions() == 0 && comm_ && env_.world_size > 1) {
    try {
      comm_->barrier(comm::GroupSpec{});
    } catch (const std::exception&) {
      // The job is ending anyway; the launcher reports who failed.
    }
  }
}

void Accelerator::prepare_model(torch::nn::Module& module,
                                std::shared_ptr<torch::optim::Optimizer> optimizer,
                                const std::string& name) {
  if (dp_) throw SpecError("prepare", "one model per Accelerator");
  if (!optimizer) throw SpecError("prepare", "the optimizer is null");
  if (options_.pipeline_stages > 1) {
    throw SpecError("STRATAGEM_PIPELINE_STAGES",
                    "a pipeline needs a torch::nn::Sequential; use prepare_pipeline()");
  }
  module.to(device_);  // set_data: the optimizer's parameter handles stay valid
  model_ = &module;
  model_name_ = name;
  if (options_.tp_size > 1) prepare_tensor_parallel(module);
  dp_ = std::make_unique<DataParallel>(module, optimizer, *comm_, tracer_, options_, device_,
                                       dp_group_);
  optimizer_ = std::make_shared<AcceleratedOptimizer>(*this, optimizer);
  tracer_.memory(dp_->memory());
  set_autocast(true);
  mark_forward_start();
}

void Accelerator::prepare_tensor_parallel(torch::nn::Module& module) {
  const int tp = options_.tp_size;
  if (env_.world_size % tp != 0) {
    throw SpecError("STRATAGEM_TP_SIZE", "tp_size " + std::to_string(tp) +
                                             " does not divide the job's " +
                                             std::to_string(env_.world_size) + " processes");
  }
  if (options_.tp_plan.empty()) {
    throw SpecError("tp_plan", "tp_size " + std::to_string(tp) +
                                   " needs AcceleratorOptions::tp_plan: the ParallelLinear layers "
                                   "to shard (module path → colwise | rowwise)");
  }
  // Every TP rank slices the same model: rank 0's weights and buffers first (DataParallel
  // then broadcasts the slices within each data-parallel group).
  {
    at::NoGradGuard no_grad;
    for (auto& p : module.parameters()) comm_->broadcast(p.detach(), 0, {})->wait();
    for (auto& b : module.buffers()) comm_->broadcast(b.detach(), 0, {})->wait();
  }
  // Megatron's numbering: TP groups are consecutive ranks, data-parallel groups the ranks of
  // equal TP index.
  tp_.comm = comm_.get();
  tp_.size = tp;
  const scenario::MeshShape mesh{.dp = dp_size(), .pp = 1, .tp = tp, .cp = 1};
  tp_.index = mesh.coord_of(env_.rank).tp;
  tp_.group.ranks.clear();
  for (int i = 0; i < tp; ++i) tp_.group.ranks.push_back(mesh.rank_of(0, dp_index(), i));
  dp_group_.ranks.clear();
  for (int d = 0; d < dp_size(); ++d) dp_group_.ranks.push_back(mesh.rank_of(0, d, tp_.index));
  parallelize_module(module, options_.tp_plan, tp_);
}

void Accelerator::prepare_pipeline_model(torch::nn::Sequential model,
                                         std::shared_ptr<torch::optim::Optimizer> optimizer) {
  if (dp_) throw SpecError("prepare", "one model per Accelerator");
  if (options_.tp_size > 1) {
    throw SpecError("STRATAGEM_TP_SIZE",
                    "the Accelerator's pipelines do not combine with tensor parallelism (run "
                    "tp_size 1, or a scenario with tp and pp through `stratagem run`)");
  }
  if (options_.pipeline_stages < 1 || env_.world_size % options_.pipeline_stages != 0) {
    throw SpecError("STRATAGEM_PIPELINE_STAGES",
                    std::to_string(options_.pipeline_stages) + " stages, but the job has " +
                        std::to_string(env_.world_size) +
                        " processes (a multiple of the stages: one stage per process, "
                        "processes / stages data-parallel pipelines)");
  }
  if (options_.sharding != scenario::Sharding::none &&
      options_.sharding != scenario::Sharding::zero1) {
    // As DeepSpeed: a stage accumulates full gradients over its micro-batches, so only the
    // optimizer states can be sharded (the scenario format refuses the same).
    throw SpecError(
        "STRATAGEM_SHARDING",
        "a pipeline shards only optimizer states (ZeRO-1) over a stage's replicas, not " +
            std::string(scenario::to_string(options_.sharding)));
  }
  pipeline_ = std::make_unique<Pipeline>(model, *comm_, tracer_, options_, device_);
  if (options_.measure_model) pipeline_->set_measurer(&measurer_, activation_element_bytes());
  stage_options_ = options_;
  model_ = model.ptr().get();
  model_name_ = readable_name(model->name());
  if (pipeline_->replicas() == 1) {
    // One pipeline: the stage's gradients need no sync; its buffers live on a one-process world.
    solo_ = std::move(comm::make_inproc_world(1, options_.timeout)[0]);
    dp_ = std::make_unique<DataParallel>(*pipeline_->stage_module(), optimizer, *solo_, tracer_,
                                         stage_options_, device_);
  } else {
    // Data-parallel pipelines: a stage's replicas average their gradients.
    dp_ = std::make_unique<DataParallel>(*pipeline_->stage_module(), optimizer, *comm_, tracer_,
                                         stage_options_, device_, pipeline_->stage_group());
  }
  optimizer_ = std::make_shared<AcceleratedOptimizer>(*this, optimizer);
  tracer_.memory(dp_->memory());
  mark_s_ = tracer_.now();
}

int Accelerator::pipeline_replica() const {
  return pipeline_ ? pipeline_->replica() : 0;
}
int Accelerator::pipeline_replicas() const {
  return pipeline_ ? pipeline_->replicas() : 1;
}

double Accelerator::train_batch(const at::Tensor& data, const at::Tensor& target,
                                const LossFn& loss_fn) {
  if (!pipeline_) throw SpecError("train_batch", "call prepare_pipeline() first");
  sync_ = true;
  backward_done_ = true;
  stepped_since_sync_ = false;
  unscaled_ = false;
  ++micro_step_;
  if (loader_) samples_per_step_ += loader_->local_batch_size();
  const double loss = pipeline_->run(data, target, loss_fn, *dp_, loss_scale());
  step_loss_ += loss;
  mark_s_ = tracer_.now();
  return loss;
}

void Accelerator::prepare_data_loader(DataLoaderBase& loader, const std::string& name) {
  if (loader.sharded()) {
    throw SpecError(name.empty() ? "prepare_data_loader" : "prepare_data_loader(" + name + ")",
                    "this data loader was prepared already (prepare each loader once)");
  }
  // Every TP rank of a group reads the same batch: loaders shard over data-parallel ranks.
  loader.shard(dp_index(), dp_size(), options_.split_batches, options_.even_batches, &observer_);
  add_loader(loader, name);
}

void Accelerator::add_loader(DataLoaderBase& loader, const std::string& name) {
  const std::string key = name.empty() ? "loader " + std::to_string(loaders_.size()) : name;
  if (std::find(loader_names_.begin(), loader_names_.end(), key) != loader_names_.end()) {
    throw SpecError("prepare_data_loader", "two loaders named \"" + key + "\"");
  }
  if (options_.seed) loader.reseed(*options_.seed);
  loaders_.push_back(&loader);
  loader_names_.push_back(key);
  if (!loader_) loader_ = &loader;  // an evaluation loader prepared later does not replace it
}

void Accelerator::set_autocast(bool on) {
  std::optional<at::ScalarType> dtype;
  if (on && options_.mixed_precision == scenario::Precision::bf16 &&
      (device_.is_cuda() || comm::compat::cpu_bf16_autocast_works())) {
    dtype = at::kBFloat16;
  }
  // fp16 autocast exists on CUDA only in LibTorch 1.13 (and bf16 on a CPU is unusable there,
  // see torch_compat.hpp): on a CPU they are emulated in the gradients (data_parallel.cpp,
  // rounded through the 16-bit type before they are communicated) with an fp32 forward.
  if (on && options_.mixed_precision == scenario::Precision::fp16 && device_.is_cuda()) {
    dtype = at::kHalf;
  }
  autocast_on_ = on;
  if (!on && options_.mixed_precision == scenario::Precision::no) return;
  comm::compat::set_autocast(device_.type(), dtype);
}

void Accelerator::begin_micro_step() {
  mark_forward_start();
}

std::string Accelerator::readable_name(std::string name) {
  for (const std::string noise : {"(anonymous namespace)::"}) {
    for (auto at = name.find(noise); at != std::string::npos; at = name.find(noise)) {
      name.erase(at, noise.size());
    }
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0) name.resize(name.size() - 4);
  return name;
}

void Accelerator::mark_forward_start() {
  mark_s_ = tracer_.now();
  if (options_.measure_model && model_ && !pipeline_ && measurer_.measured() < 2) {
    measurer_.arm();
  }
}

double Accelerator::activation_element_bytes() const {
  // fp32 unless autocast runs the forward in 16 bits (CUDA; on a CPU 16 bits are emulated).
  return device_.is_cuda() && options_.mixed_precision != scenario::Precision::no ? 2.0 : 4.0;
}


double Accelerator::loss_scale() const {
  return scaler_ ? scaler_->scale() : 1.0;
}

void Accelerator::backward(const at::Tensor& loss) {
  if (!dp_) throw SpecError("backward", "call prepare() before backward()");
  launch::Heartbeat::progress("backward");
  if (pipeline_) throw SpecError("backward", "a pipeline trains with train_batch()");
  const double forward_end = tracer_.now();
  tracer_.add(result::SpanKind::forward, plan::Stream::compute, mark_s_, forward_end);
  if (measurer_.armed()) {
    measurer_.finish(loss, *model_, dp_.get(), loader_ ? loader_->local_batch_size() : 1,
                     activation_element_bytes());
  }
  check_usage(UsagePoint::backward);
  sync_ = decide_sync();
  backward_done_ = true;
  ++micro_step_;
  step_loss_ += loss.detach().to(at::kDouble).item<double>();
  if (loader_) samples_per_step_ += loader_->local_batch_size();
  at::Tensor l = loss;
  const int accum = options_.gradient_accumulation_steps;
  if (accum > 1) l = l / accum;
  if (scaler_) l = l * scaler_->scale();
  set_autocast(false);
  dp_->before_backward(sync_);
  const int span = tracer_.begin(result::SpanKind::backward, plan::Stream::compute);
  l.backward();
  tracer_.end(span);
  dp_->after_backward();
  if (sync_) {
    stepped_since_sync_ = false;
    unscaled_ = false;
  }
  set_autocast(true);
  mark_forward_start();
}

void Accelerator::optimizer_step() {
  launch::Heartbeat::progress("optimizer step");
  check_usage(UsagePoint::optimizer_step);
  if (!sync_) return;  // accumulating
  set_autocast(false);
  skipped_ = false;
  if (scaler_) {
    const bool overflow = unscale_gradients();
    scaler_->update(overflow);
    if (overflow) {
      skipped_ = true;
      dp_->skip_step();
    }
    unscaled_ = false;
  }
  if (!skipped_) dp_->step();
  stepped_since_sync_ = true;
  ++optimizer_steps_;
  losses_.push_back(step_loss_ / options_.gradient_accumulation_steps);
  step_loss_ = 0;
  tracer_.end_step();
  set_autocast(true);
  mark_forward_start();
}

void Accelerator::optimizer_zero_grad() {
  if (!sync_) return;  // keep accumulating
  dp_->zero_grad();
}

void Accelerator::wait_for_everyone() {
  comm_->barrier(comm::GroupSpec{});
}

at::Tensor Accelerator::gather(const at::Tensor& tensor) {
  at::Tensor t = tensor.detach().to(device_).contiguous();
  if (t.dim() == 0) t = t.reshape({1});
  // Shapes must agree: compare each process's against the largest and smallest.
  std::vector<std::int64_t> shape(t.sizes().begin(), t.sizes().end());
  at::Tensor dims = at::tensor(shape, at::kLong).to(device_);
  at::Tensor hi = dims.clone(), lo = dims.neg();
  // Over the data-parallel ranks: a TP group's ranks hold the same values.
  comm_->all_reduce(hi, dp_group_, comm::ReduceOp::max)->wait();
  comm_->all_reduce(lo, dp_group_, comm::ReduceOp::max)->wait();
  if (!at::equal(hi, lo.neg())) {
    throw SpecError("gather", "the tensors' shapes differ between processes");
  }
  at::Tensor out = at::empty({t.numel() * dp_size()}, t.options());
  comm_->all_gather(out, t.reshape({-1}), dp_group_)->wait();
  shape[0] *= dp_size();
  return out.reshape(shape);
}

at::Tensor Accelerator::reduce(const at::Tensor& tensor, const std::string& op) {
  if (op != "sum" && op != "mean" && op != "max") {
    throw SpecError("reduce", "expected \"sum\", \"mean\" or \"max\", got \"" + op + "\"");
  }
  at::Tensor t = tensor.detach().to(device_).contiguous().clone();
  if (op == "mean" && !t.is_floating_point()) t = t.to(at::kFloat);
  comm_->all_reduce(t, dp_group_, op == "max" ? comm::ReduceOp::max : comm::ReduceOp::sum)->wait();
  if (op == "mean") t.div_(dp_size());
  return t;
}

}  // namespace stratagem::accelerate
