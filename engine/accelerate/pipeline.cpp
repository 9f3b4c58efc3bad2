#include "engine/accelerate/pipeline.hpp"

#include "engine/accelerate/measure.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "engine/accelerate/data_parallel.hpp"
#include "engine/comm/torch_compat.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace {

constexpr int kMaxDims = 7;
constexpr int kHeader = kMaxDims + 2;  // ndim, dims, dtype
enum Kind { kHeaderMsg = 0, kActivation = 1, kGradient = 2 };

std::int64_t param_count(const std::shared_ptr<torch::nn::Module>& m) {
  std::int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  return n;
}

}  // namespace

Pipeline::Pipeline(torch::nn::Sequential model, comm::Communicator& comm, Tracer& tracer,
                   const AcceleratorOptions& options, c10::Device device)
    : model_(std::move(model)),
      comm_(comm),
      tracer_(tracer),
      options_(options),
      device_(device),
      stages_(std::max(1, options.pipeline_stages)) {
  if (comm.world_size() % stages_ != 0) {
    throw SpecError("STRATAGEM_PIPELINE_STAGES",
                    std::to_string(stages_) + " stages do not divide the job's " +
                        std::to_string(comm.world_size()) + " processes");
  }
  dp_ = comm.world_size() / stages_;
  stage_ = comm.rank() / dp_;
  replica_ = comm.rank() % dp_;
  const int layers = static_cast<int>(model_->size());
  if (layers < stages_) {
    throw SpecError("STRATAGEM_PIPELINE_STAGES", std::to_string(stages_) +
                                                     " stages need at least as many layers; the "
                                                     "Sequential has " +
                                                     std::to_string(layers));
  }
  // Contiguous stages balanced by parameters: stage s ends at the first layer where the
  // running count reaches (s + 1)/stages of the total, leaving a layer for each later stage.
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
  for (const auto& m : model_->children()) {
    counts.push_back(param_count(m));
    total += counts.back();
  }
  std::vector<int> ends;
  std::int64_t running = 0;
  int l = 0;
  for (int s = 0; s < stages_; ++s) {
    const int must_leave = stages_ - s - 1;
    const double target = static_cast<double>(total) * (s + 1) / stages_;
    do {
      running += counts[static_cast<std::size_t>(l)];
      ++l;
    } while (l < layers - must_leave && static_cast<double>(running) < target);
    if (s == stages_ - 1) l = layers;
    ends.push_back(l);
  }
  begin_ = stage_ == 0 ? 0 : ends[static_cast<std::size_t>(stage_ - 1)];
  end_ = ends[static_cast<std::size_t>(stage_)];
  const auto children = model_->children();
  model_->to(device_);
  int i = 0;
  for (const auto& layer : *model_) {
    if (i >= begin_ && i < end_) {
      stage_module_->push_back(std::to_string(i), layer);
    } else {
      for (auto& p : children[static_cast<std::size_t>(i)]->parameters()) {
        comm::compat::resize_storage(p, 0);  // another stage's: not held here
      }
    }
    ++i;
  }
}

comm::GroupSpec Pipeline::stage_group() const {
  comm::GroupSpec g;
  for (int j = 0; j < dp_; ++j) g.ranks.push_back(stage_ * dp_ + j);
  return g;
}

std::uint32_t Pipeline::tag(int mb, int kind) const {
  return static_cast<std::uint32_t>((step_ % 4096) * 4096 + mb * 4 + kind);
}

double Pipeline::run(const at::Tensor& data, const at::Tensor& target, const LossFn& loss_fn,
                     DataParallel& dp, double loss_scale) {
  loss_scale_ = loss_scale;
  const int m = options_.pipeline_micro_batches > 0 ? options_.pipeline_micro_batches : stages_;
  if (data.size(0) % m != 0) {
    throw SpecError("STRATAGEM_PIPELINE_MICRO_BATCHES",
                    "the batch of " + std::to_string(data.size(0)) + " does not split into " +
                        std::to_string(m) + " micro-batches");
  }
  const auto data_mb = data.chunk(m, 0), target_mb = target.chunk(m, 0);
  inputs_.assign(static_cast<std::size_t>(m), at::Tensor());
  outputs_.assign(static_cast<std::size_t>(m), at::Tensor());
  loss_sum_ = 0;
  dp.before_backward(false);  // accumulate over micro-batches; synced once at the end
  if (options_.pipeline_schedule == scenario::Schedule::gpipe) {
    for (int i = 0; i < m; ++i) forward(i, m, data_mb, target_mb, loss_fn);
    for (int i = 0; i < m; ++i) backward(i);
  } else {
    const int warm = std::min(stages_ - stage_ - 1, m);
    for (int i = 0; i < warm; ++i) forward(i, m, data_mb, target_mb, loss_fn);
    for (int i = 0; i < m - warm; ++i) {
      forward(warm + i, m, data_mb, target_mb, loss_fn);
      backward(i);
    }
    for (int i = m - warm; i < m; ++i) backward(i);
  }
  for (auto& w : sends_) w->wait();
  sends_.clear();
  keep_.clear();
  dp.before_backward(true);
  dp.after_backward();
  ++step_;
  // The last stage of each replica knows its loss; everyone returns their mean.
  at::Tensor loss = at::tensor({stage_ == stages_ - 1 ? loss_sum_ : 0.0}, at::kDouble).to(device_);
  comm_.all_reduce(loss, comm::GroupSpec{}, comm::ReduceOp::sum)->wait();
  return loss.cpu().item<double>() / dp_;
}

void Pipeline::forward(int mb, int micro_batches, const std::vector<at::Tensor>& data,
                       const std::vector<at::Tensor>& target, const LossFn& loss_fn) {
  at::Tensor x;
  if (stage_ == 0) {
    x = data[static_cast<std::size_t>(mb)].to(device_);
  } else {
    at::Tensor header = at::empty({kHeader}, at::TensorOptions().dtype(at::kLong).device(device_));
    const int span = tracer_.begin(result::SpanKind::recv, plan::Stream::p2p);
    comm_.recv(header, comm_.rank() - dp_, tag(mb, kHeaderMsg))->wait();
    header = header.cpu();
    std::vector<std::int64_t> shape;
    for (int d = 0; d < header[0].item<std::int64_t>(); ++d) {
      shape.push_back(header[d + 1].item<std::int64_t>());
    }
    const auto dtype = static_cast<at::ScalarType>(header[kMaxDims + 1].item<std::int64_t>());
    x = at::empty(shape, at::TensorOptions().dtype(dtype).device(device_));
    comm_.recv(x, comm_.rank() - dp_, tag(mb, kActivation))->wait();
    tracer_.end(span);
    x.requires_grad_(true);
  }
  inputs_[static_cast<std::size_t>(mb)] = x;
  const int span = tracer_.begin(result::SpanKind::forward, plan::Stream::compute);
  const bool measure = measurer_ && mb == 0 && measurer_->measured() < 2 && measurer_->arm();
  at::Tensor y = stage_module_->forward(x);
  if (stage_ == stages_ - 1) {
    y = loss_fn(y, target[static_cast<std::size_t>(mb)].to(device_)) / micro_batches;
  }
  if (measure) {
    measurer_->finish(y, *stage_module_, nullptr, data[static_cast<std::size_t>(mb)].size(0),
                      element_bytes_);
  }
  if (stage_ == stages_ - 1) loss_sum_ += y.detach().to(at::kDouble).item<double>();
  tracer_.end(span);
  outputs_[static_cast<std::size_t>(mb)] = y;
  if (stage_ < stages_ - 1) {
    if (y.dim() > kMaxDims) throw SpecError("model", "pipeline activations have at most 7 dims");
    at::Tensor header = at::zeros({kHeader}, at::kLong);
    header[0] = y.dim();
    for (int d = 0; d < y.dim(); ++d) header[d + 1] = y.size(d);
    header[kMaxDims + 1] = static_cast<std::int64_t>(y.scalar_type());
    keep_.push_back(header.to(device_));
    sends_.push_back(comm_.send(keep_.back(), comm_.rank() + dp_, tag(mb, kHeaderMsg)));
    keep_.push_back(y.detach().contiguous());
    const int s = tracer_.begin(result::SpanKind::send, plan::Stream::p2p,
                                static_cast<double>(keep_.back().nbytes()));
    sends_.push_back(comm_.send(keep_.back(), comm_.rank() + dp_, tag(mb, kActivation)));
    tracer_.end(s);
  }
}

void Pipeline::backward(int mb) {
  at::Tensor& y = outputs_[static_cast<std::size_t>(mb)];
  const int span = tracer_.begin(result::SpanKind::backward, plan::Stream::compute);
  if (stage_ == stages_ - 1) {
    (loss_scale_ != 1.0 ? y * loss_scale_ : y).backward();
  } else {
    at::Tensor g = at::empty_like(y);
    comm_.recv(g, comm_.rank() + dp_, tag(mb, kGradient))->wait();
    y.backward(g);
  }
  tracer_.end(span);
  if (stage_ > 0) {
    keep_.push_back(inputs_[static_cast<std::size_t>(mb)].grad().contiguous());
    sends_.push_back(comm_.send(keep_.back(), comm_.rank() - dp_, tag(mb, kGradient)));
  }
  inputs_[static_cast<std::size_t>(mb)] = at::Tensor();
  y = at::Tensor();
}

}  // namespace stratagem::accelerate
