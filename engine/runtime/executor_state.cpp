#include "engine/runtime/executor_state.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

double elem_bytes(at::ScalarType t) {
  return static_cast<double>(c10::elementSize(t));
}

double tensor_bytes(const at::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * elem_bytes(t.scalar_type()) : 0.0;
}

// Frees a tensor's memory but keeps the tensor (and views of it) usable once refilled.
void drop_storage(const at::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  impl->set_nbytes(0);
}

// Moves `from`'s memory into `to`'s storage: views of `to` now read `from`'s data.
void move_storage(const at::Tensor& from, const at::Tensor& to) {
  auto* src = from.storage().unsafeGetStorageImpl();
  const auto nbytes = src->nbytes();
  at::DataPtr data = src->set_data_ptr(at::DataPtr(nullptr, from.device()));
  src->set_nbytes(0);
  auto* dst = to.storage().unsafeGetStorageImpl();
  dst->set_data_ptr_noswap(std::move(data));
  dst->set_nbytes(nbytes);
}

}  // namespace

OptimizerConfig OptimizerConfig::defaults(scenario::Optimizer kind, double lr) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  c.weight_decay = kind == scenario::Optimizer::adamw ? 0.01 : 0.0;
  return c;
}

ModelState::ModelState(const plan::StepPlan& plan, int rank, const GptUnits& units,
                       std::uint64_t seed, const OptimizerConfig& optimizer, c10::Device device)
    : units_(units), opt_(optimizer), device_(device), opt_device_(device) {
  std::vector<std::int64_t> numel;
  for (int u = 0; u < units.count(); ++u) numel.push_back(units.numel(u));
  layout_ = derive_rank_layout(plan, rank, numel);
  const auto& opt_op = std::get<plan::Compute>(plan.ops[layout_.optimizer_op].payload);
  if (opt_op.on_host) opt_device_ = c10::Device(c10::kCPU);
  dtype_ = units.numerics().param_dtype;
  master_ = scenario::has_master_weights(plan.scenario.strategy);
  const auto on_device = at::TensorOptions().dtype(dtype_).device(device_);
  const auto f32_opt = at::TensorOptions().dtype(at::kFloat).device(opt_device_);

  // Initial values: each segment's full parameters in fp32, then the slices this rank keeps.
  if (layout_.params_sharded) {
    params_shard_ = at::zeros({layout_.shard_numel}, on_device);
  } else {
    params_full_ = at::zeros({layout_.full_numel}, on_device);
  }
  if (master_) master_weights_ = at::zeros({layout_.opt_numel}, f32_opt);
  for (const Segment& seg : layout_.segments) {
    auto full = at::zeros({seg.padded}, at::TensorOptions().dtype(at::kFloat));
    for (std::size_t i = 0; i < seg.units.size(); ++i) {
      full.narrow(0, seg.unit_offset[i], units.numel(seg.units[i]))
          .copy_(units.initial_params(seg.units[i], seed));
    }
    if (layout_.params_sharded) {
      params_shard_.narrow(0, seg.shard_offset, seg.shard)
          .copy_(full.narrow(0, seg.shard_index * seg.shard, seg.shard));
    } else {
      params_full_.narrow(0, seg.full_offset, seg.padded).copy_(full);
    }
    if (master_) {
      const std::int64_t from = layout_.opt_sharded ? seg.shard_index * seg.shard : 0;
      master_weights_.narrow(0, seg.opt_offset, seg.opt_numel)
          .copy_(full.narrow(0, from, seg.opt_numel));
    }
  }
  if (layout_.grads_staged) {
    grads_shard_ = at::zeros({layout_.shard_numel}, on_device);
  } else {
    grads_full_ = at::zeros({layout_.full_numel}, on_device);
  }
  exp_avg_ = at::zeros({layout_.opt_numel}, f32_opt);
  if (opt_.kind != scenario::Optimizer::sgd) exp_avg_sq_ = at::zeros({layout_.opt_numel}, f32_opt);
  if (plan.scenario.strategy.precision == scenario::Precision::fp16) {
    found_inf_ = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device_));
    scale_ = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(device_));
  }
  for (const Segment& seg : layout_.segments) {
    auto g = at::empty({seg.padded}, on_device);
    drop_storage(g);
    gathered_.push_back(g);
  }
  holders_.assign(layout_.segments.size(), 0);
  staged_.resize(layout_.segments.size());
  if (opt_device_ != device_ || opt_op.on_host) {
    host_bytes_ =
        tensor_bytes(master_weights_) + tensor_bytes(exp_avg_) + tensor_bytes(exp_avg_sq_);
  }
}

// ---- parameters -------------------------------------------------------------------------

at::Tensor ModelState::unit_params(int unit) const {
  const int s = layout_.segment_of_unit.at(unit);
  const Segment& seg = layout_.segments.at(s);
  const std::int64_t off = layout_.offset_in_segment(unit);
  if (!layout_.params_sharded)
    return params_full_.narrow(0, seg.full_offset + off, units_.numel(unit));
  if (holders_[s] == 0) {
    throw RuntimeError("unit " + std::to_string(unit) +
                       "'s parameters are sharded and not gathered when its compute runs");
  }
  return gathered_[s].narrow(0, off, units_.numel(unit));
}

at::Tensor ModelState::params_shard(int segment) const {
  const Segment& seg = layout_.segments.at(segment);
  if (layout_.params_sharded) return params_shard_.narrow(0, seg.shard_offset, seg.shard);
  return params_full_.narrow(0, seg.full_offset + seg.shard_index * seg.shard, seg.shard);
}

at::Tensor ModelState::params_full(int segment) const {
  const Segment& seg = layout_.segments.at(segment);
  return params_full_.narrow(0, seg.full_offset, seg.padded);
}

at::Tensor ModelState::new_gather_buffer(int segment) const {
  return at::empty({layout_.segments.at(segment).padded},
                   at::TensorOptions().dtype(dtype_).device(device_));
}

void ModelState::hold_gathered(int segment, at::Tensor gathered) {
  // Parameters do not change within a step: a second gather of a held segment brings the
  // same values, so the held copy stays and the new one is dropped.
  if (holders_[segment] == 0) move_storage(gathered, gathered_[segment]);
  ++holders_[segment];
}

void ModelState::release_gathered(int segment) {
  if (holders_[segment] <= 0) {
    throw RuntimeError("segment " + std::to_string(segment) + " released more than gathered");
  }
  if (--holders_[segment] == 0) drop_storage(gathered_[segment]);
}

// ---- gradients ----------------------------------------------------------------------------

void ModelState::zero_grads() {
  if (grads_full_.defined()) grads_full_.zero_();
  if (grads_shard_.defined()) grads_shard_.zero_();
  if (found_inf_.defined()) found_inf_.zero_();
}

void ModelState::add_grad(int unit, std::int64_t offset, const at::Tensor& grad) {
  const int s = layout_.segment_of_unit.at(unit);
  const Segment& seg = layout_.segments[s];
  const std::int64_t at_ = layout_.offset_in_segment(unit) + offset;
  if (layout_.grads_staged) {
    if (!staged_[s].defined()) {
      staged_[s] = at::zeros({seg.padded}, at::TensorOptions().dtype(dtype_).device(device_));
    }
    staged_[s].narrow(0, at_, grad.numel()).add_(grad.reshape({-1}));
  } else {
    grads_full_.narrow(0, seg.full_offset + at_, grad.numel()).add_(grad.reshape({-1}));
  }
}

at::Tensor ModelState::take_staged(int segment) {
  at::Tensor t = std::move(staged_[segment]);
  staged_[segment] = at::Tensor();
  if (!t.defined())
    t = at::zeros({layout_.segments[segment].padded},
                  at::TensorOptions().dtype(dtype_).device(device_));
  return t;
}

at::Tensor ModelState::grads_full(int segment) const {
  const Segment& seg = layout_.segments.at(segment);
  return grads_full_.narrow(0, seg.full_offset, seg.padded);
}

at::Tensor ModelState::new_shard_buffer(int segment) const {
  return at::empty({layout_.segments.at(segment).shard},
                   at::TensorOptions().dtype(dtype_).device(device_));
}

void ModelState::apply_reduced_shard(int segment, const at::Tensor& shard) {
  const Segment& seg = layout_.segments.at(segment);
  if (layout_.grads_staged) {
    grads_shard_.narrow(0, seg.shard_offset, seg.shard).add_(shard);
  } else {
    grads_full_.narrow(0, seg.full_offset + seg.shard_index * seg.shard, seg.shard).copy_(shard);
  }
}

at::Tensor ModelState::slot_grad(int unit, const std::string& slot) const {
  if (layout_.grads_staged) {
    throw RuntimeError("the gradient of " + slot + " is sharded; it has no full copy");
  }
  const auto& s = units_.layout(unit).slot(slot);
  const Segment& seg = layout_.segment_of(unit);
  return grads_full_.narrow(0, seg.full_offset + layout_.offset_in_segment(unit) + s.offset,
                            s.numel);
}

std::vector<std::pair<at::Tensor, std::int64_t>> ModelState::resident_slot_grads(
    const std::vector<std::pair<int, const ParamSlot*>>& slots) const {
  std::vector<std::pair<at::Tensor, std::int64_t>> out;
  std::int64_t concat = 0;
  for (const auto& [unit, slot] : slots) {
    const Segment& seg = layout_.segment_of(unit);
    const std::int64_t at_ = layout_.offset_in_segment(unit) + slot->offset;
    if (!layout_.grads_staged) {
      out.emplace_back(grads_full_.narrow(0, seg.full_offset + at_, slot->numel), concat);
    } else {
      const std::int64_t first = seg.shard_index * seg.shard;
      const std::int64_t lo = std::max(at_, first);
      const std::int64_t hi = std::min(at_ + slot->numel, first + seg.shard);
      if (lo < hi) {
        out.emplace_back(grads_shard_.narrow(0, seg.shard_offset + lo - first, hi - lo),
                         concat + lo - at_);
      }
    }
    concat += slot->numel;
  }
  return out;
}

// ---- optimizer ----------------------------------------------------------------------------

at::Tensor ModelState::opt_view(const at::Tensor& t, const Segment& seg) const {
  return t.narrow(0, seg.opt_offset, seg.opt_numel);
}

at::Tensor ModelState::opt_params(const Segment& seg) const {
  if (layout_.params_sharded) return params_shard_.narrow(0, seg.shard_offset, seg.shard);
  if (layout_.opt_sharded) {
    return params_full_.narrow(0, seg.full_offset + seg.shard_index * seg.shard, seg.shard);
  }
  return params_full_.narrow(0, seg.full_offset, seg.padded);
}

at::Tensor ModelState::opt_grads(const Segment& seg) const {
  if (layout_.grads_staged) return grads_shard_.narrow(0, seg.shard_offset, seg.shard);
  if (layout_.opt_sharded) {
    return grads_full_.narrow(0, seg.full_offset + seg.shard_index * seg.shard, seg.shard);
  }
  return grads_full_.narrow(0, seg.full_offset, seg.padded);
}

void ModelState::check_overflow() {
  bool bad = false;
  for (const Segment& seg : layout_.segments) {
    if (!at::isfinite(opt_grads(seg)).all().item<bool>()) bad = true;
  }
  if (found_inf_.defined()) found_inf_.fill_(bad ? 1.0 : 0.0);
}

void ModelState::inject_inf() {
  opt_grads(layout_.segments.front())
      .narrow(0, 0, 1)
      .fill_(std::numeric_limits<double>::infinity());
}

bool ModelState::overflow() const {
  return found_inf_.defined() && found_inf_.item<float>() > 0;
}

void ModelState::optimizer_step(double grad_factor) {
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  for (const Segment& seg : layout_.segments) {
    auto g = opt_grads(seg).to(opt_device_, at::kFloat);
    if (grad_factor != 1.0) g = g * grad_factor;
    at::Tensor stored = opt_params(seg);
    at::Tensor p = master_ ? opt_view(master_weights_, seg) : stored.to(opt_device_, at::kFloat);
    auto m = opt_view(exp_avg_, seg);
    // torch.optim's single-tensor updates (adamw.py, adam.py, sgd.py), element-wise.
    switch (opt_.kind) {
      case scenario::Optimizer::adamw:
      case scenario::Optimizer::adam: {
        if (opt_.kind == scenario::Optimizer::adamw) {
          p.mul_(1.0 - opt_.lr * opt_.weight_decay);
        } else if (opt_.weight_decay != 0) {
          g = g.add(p, opt_.weight_decay);
        }
        auto v = opt_view(exp_avg_sq_, seg);
        m.mul_(opt_.beta1).add_(g, 1.0 - opt_.beta1);
        v.mul_(opt_.beta2).addcmul_(g, g, 1.0 - opt_.beta2);
        const double bc1 = 1.0 - std::pow(opt_.beta1, t);
        const double bc2 = 1.0 - std::pow(opt_.beta2, t);
        auto denom = (v.sqrt() / std::sqrt(bc2)).add_(opt_.eps);
        p.addcdiv_(m, denom, -opt_.lr / bc1);
        break;
      }
      case scenario::Optimizer::sgd: {
        if (opt_.weight_decay != 0) g = g.add(p, opt_.weight_decay);
        if (step_count_ == 1) {
          m.copy_(g);
        } else {
          m.mul_(opt_.momentum).add_(g);
        }
        p.add_(m, -opt_.lr);
        break;
      }
    }
    if (master_ || p.data_ptr() != stored.data_ptr()) stored.copy_(p);
  }
}

// ---- accounting -----------------------------------------------------------------------------

std::array<double, plan::kTensorClassCount> ModelState::resident_bytes() const {
  std::array<double, plan::kTensorClassCount> b{};
  auto set = [&](plan::TensorClass c, double v) { b[static_cast<int>(c)] = v; };
  set(plan::TensorClass::params, tensor_bytes(params_full_) + tensor_bytes(params_shard_));
  set(plan::TensorClass::grads, tensor_bytes(grads_full_) + tensor_bytes(grads_shard_));
  if (host_bytes_ == 0) {
    set(plan::TensorClass::optimizer, tensor_bytes(exp_avg_) + tensor_bytes(exp_avg_sq_));
    set(plan::TensorClass::master_weights, tensor_bytes(master_weights_));
  }
  set(plan::TensorClass::loss_scale, tensor_bytes(found_inf_) + tensor_bytes(scale_));
  return b;
}

double ModelState::gathered_bytes() const {
  double b = 0;
  for (const auto& g : gathered_) {
    b += static_cast<double>(g.storage().nbytes());
  }
  return b;
}

double ModelState::staged_bytes() const {
  double b = 0;
  for (const auto& s : staged_) b += tensor_bytes(s);
  return b;
}

std::vector<std::pair<std::string, at::Tensor>> ModelState::state_tensors() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("params", layout_.params_sharded ? params_shard_ : params_full_);
  if (master_) out.emplace_back("master_weights", master_weights_);
  out.emplace_back(opt_.kind == scenario::Optimizer::sgd ? "momentum" : "exp_avg", exp_avg_);
  if (exp_avg_sq_.defined()) out.emplace_back("exp_avg_sq", exp_avg_sq_);
  return out;
}

}  // namespace stratagem::runtime
