#include "engine/accelerate/tensor_parallel.hpp"

#include <cmath>

#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace {

void all_reduce(const TpGroup& g, torch::Tensor& t) {
  g.comm->all_reduce(t, g.group, comm::ReduceOp::sum)->wait();
}

}  // namespace

ParallelLinearImpl::ParallelLinearImpl(const torch::nn::LinearOptions& options_)
    : options(options_) {
  reset();
}

void ParallelLinearImpl::reset() {
  sharded_ = false;
  weight = register_parameter("weight",
                              torch::empty({options.out_features(), options.in_features()}));
  if (options.bias()) {
    bias = register_parameter("bias", torch::empty(options.out_features()));
  } else {
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  }
  reset_parameters();
}

void ParallelLinearImpl::reset_parameters() {
  // torch::nn::Linear's initialisation, so a model that swaps it in starts alike.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

void ParallelLinearImpl::pretty_print(std::ostream& stream) const {
  stream << "stratagem::accelerate::ParallelLinear(in_features=" << options.in_features()
         << ", out_features=" << options.out_features() << ", bias=" << options.bias();
  if (sharded_) {
    stream << ", " << (style_ == TpStyle::colwise ? "colwise" : "rowwise") << " "
           << group_.index << "/" << group_.size;
  }
  stream << ")";
}

torch::Tensor ParallelLinearImpl::forward(const torch::Tensor& input) {
  if (!sharded_) return torch::nn::functional::linear(input, weight, bias);
  const TpGroup g = group_;
  if (style_ == TpStyle::colwise) {
    torch::Tensor x = input;
    if (x.requires_grad()) {
      // f: identity forward; the input's gradient is summed over the group.
      x = input.view_as(input);
      x.register_hook([g](torch::Tensor grad) {
        torch::Tensor sum = grad.contiguous().clone();
        all_reduce(g, sum);
        return sum;
      });
    }
    return torch::nn::functional::linear(x, weight, bias);
  }
  // g: the partial products summed over the group; the gradient passes through unchanged.
  torch::Tensor partial = torch::nn::functional::linear(input, weight);
  torch::Tensor sum = partial.detach().contiguous().clone();
  all_reduce(g, sum);
  torch::Tensor out = partial + (sum - partial.detach());
  return bias.defined() ? out + bias : out;
}

void ParallelLinearImpl::shard(TpStyle style, const TpGroup& group, const std::string& path) {
  if (sharded_) throw SpecError("tp_plan", "\"" + path + "\" is named twice");
  const int dim = style == TpStyle::colwise ? 0 : 1;
  const std::int64_t n = weight.size(dim);
  if (n % group.size != 0) {
    throw SpecError("tp_plan", "\"" + path + "\" (" +
                                   (style == TpStyle::colwise ? "colwise" : "rowwise") + "): " +
                                   (dim == 0 ? "out_features " : "in_features ") +
                                   std::to_string(n) + " is not divisible by tp = " +
                                   std::to_string(group.size));
  }
  torch::NoGradGuard no_grad;
  const std::int64_t part = n / group.size;
  weight.set_data(weight.narrow(dim, group.index * part, part).clone());
  if (bias.defined() && style == TpStyle::colwise) {
    bias.set_data(bias.narrow(0, group.index * part, part).clone());
  }
  style_ = style;
  group_ = group;
  sharded_ = true;
}

std::vector<std::pair<std::string, torch::Tensor>> ParallelLinearImpl::full_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto gather = [&](const torch::Tensor& t, int dim) {
    // Slices along `dim`, ranks in group order: gather the slices flat, then lay them side by
    // side.
    torch::Tensor local = t.detach().transpose(0, dim).contiguous();
    torch::Tensor all = torch::empty({local.numel() * group_.size}, local.options());
    group_.comm->all_gather(all, local.reshape({-1}), group_.group)->wait();
    std::vector<std::int64_t> shape(local.sizes().begin(), local.sizes().end());
    shape[0] *= group_.size;
    return all.view(shape).transpose(0, dim).contiguous();
  };
  const bool col = style_ == TpStyle::colwise;
  out.emplace_back("weight", sharded_ ? gather(weight, col ? 0 : 1) : weight.detach().clone());
  if (bias.defined()) {
    out.emplace_back("bias", sharded_ && col ? gather(bias, 0) : bias.detach().clone());
  }
  return out;
}

void parallelize_module(torch::nn::Module& model, const TpPlan& plan, const TpGroup& group) {
  auto modules = model.named_modules("", /*include_self=*/false);
  for (const auto& [path, style] : plan) {
    auto* found = modules.find(path);
    if (!found) {
      throw SpecError("tp_plan", "\"" + path + "\" names no module of the model (named_modules() "
                                 "paths, e.g. \"blocks.0.fc_in\")");
    }
    auto* linear = dynamic_cast<ParallelLinearImpl*>(found->get());
    if (!linear) {
      throw SpecError("tp_plan", "\"" + path + "\" is a " + (*found)->name() +
                                     ", not a stratagem::accelerate::ParallelLinear (declare the "
                                     "layer as ParallelLinear to shard it)");
    }
    linear->shard(style, group, path);
  }
}

}  // namespace stratagem::accelerate
