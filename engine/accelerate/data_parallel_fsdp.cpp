// DataParallel's FSDP side: units by the wrap policy (type names or size), the forward
// wrappers of units inside a torch::nn::Sequential (gather, run, free, re-gather before their
// backward), and handing the model back whole (release, gather_units).
#include <functional>
#include <set>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include "engine/accelerate/data_parallel.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace {

// "EncoderLayerImpl", "my::EncoderLayerImpl" and "EncoderLayer" all match "EncoderLayer".
bool type_matches(const std::string& module_name, const std::string& wanted) {
  std::string n = module_name;
  const auto colon = n.rfind("::");
  if (colon != std::string::npos) n = n.substr(colon + 2);
  if (n == wanted || module_name == wanted) return true;
  return n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0 &&
         n.substr(0, n.size() - 4) == wanted;
}

}  // namespace

void DataParallel::build_units(torch::nn::Module& model) {
  // Units by type name, else by size (bottom-up: a module whose not-yet-wrapped parameters
  // reach the threshold is a unit); the rest is the root unit, gathered like the others.
  std::vector<std::pair<std::string, std::vector<at::Tensor>>> units;
  std::vector<const void*> unit_modules;
  std::set<std::string> matched, seen_types;
  std::function<std::vector<at::Tensor>(const std::string&, torch::nn::Module&, bool)> visit;
  visit = [&](const std::string& path, torch::nn::Module& m, bool is_root) {
    bool by_type = false;
    seen_types.insert(m.name());
    for (const auto& cls : options_.fsdp_wrap_cls) {
      if (type_matches(m.name(), cls)) {
        by_type = true;
        matched.insert(cls);
      }
    }
    std::vector<at::Tensor> left;
    for (auto& child : m.named_children()) {
      const std::string child_path = path.empty() ? child.key() : path + "." + child.key();
      auto rest = visit(child_path, *child.value(), false);
      left.insert(left.end(), rest.begin(), rest.end());
    }
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      if (p.value().requires_grad()) left.push_back(p.value());
    }
    std::int64_t n = 0;
    for (auto& p : left) n += p.numel();
    const bool by_size = options_.fsdp_wrap_cls.empty() && options_.fsdp_min_num_params > 0 &&
                         n >= options_.fsdp_min_num_params;
    if (!is_root && (by_type || by_size) && !left.empty()) {
      units.emplace_back(path + " (" + m.name() + ")", std::move(left));
      unit_modules.push_back(&m);
      return std::vector<at::Tensor>{};
    }
    return left;
  };
  auto root = visit("", model, true);
  // A wrap class naming no module of the model (a typo, a namespace) would silently leave
  // the whole model one unit: say which, and what there is.
  for (const auto& cls : options_.fsdp_wrap_cls) {
    if (matched.count(cls)) continue;
    std::string types;
    for (const auto& t : seen_types) types += (types.empty() ? "" : ", ") + t;
    throw SpecError("fsdp_transformer_layer_cls_to_wrap",
                    "no module of the model has type \"" + cls + "\" (its module types: " +
                        types + ")");
  }
  if (!root.empty()) {
    units.emplace_back("root", std::move(root));
    unit_modules.push_back(nullptr);
  }
  for (std::size_t u = 0; u < units.size(); ++u) {
    auto& [name, params] = units[u];
    const int pg = param_group_of(params.front());
    for (auto& p : params) {
      if (param_group_of(p) != pg) {
        throw SpecError("optimizer", "FSDP unit " + name +
                                         " mixes parameters of different optimizer parameter "
                                         "groups; one unit must share one group's options");
      }
    }
    if (pg < 0) throw SpecError("optimizer", "a parameter of unit " + name + " is not in it");
    FlatGroup G;
    G.name = name;
    G.param_group = pg;
    G.module = unit_modules[u];
    G.build(std::move(params), world_, rank_, device_);
    groups_.push_back(std::move(G));
  }
  if (sharding_ == scenario::Sharding::fsdp_full_shard) wrap_sequential_units(model);
}

namespace {

// A FULL_SHARD unit's place in its Sequential: gathered before, freed after its forward.
class FsdpForwardImpl : public torch::nn::Module {
 public:
  FsdpForwardImpl(torch::nn::AnyModule inner, DataParallel* dp, std::size_t unit, std::string name)
      : inner_(std::move(inner)), dp_(dp), unit_(unit), name_(std::move(name)) {}
  at::Tensor forward(at::Tensor x) {
    dp_->gather_unit(unit_);
    at::Tensor y;
    try {
      y = inner_.forward<at::Tensor>(std::move(x));
    } catch (const c10::Error& e) {
      throw SpecError("FSDP unit " + name_,
                      "an element of a torch::nn::Sequential must take and return one tensor to "
                      "be gathered during the forward: " +
                          std::string(e.what_without_backtrace()));
    }
    dp_->after_unit_forward(unit_, y);
    return y;
  }
  const torch::nn::AnyModule& inner() const { return inner_; }

 private:
  torch::nn::AnyModule inner_;
  DataParallel* dp_;
  std::size_t unit_;
  std::string name_;
};

}  // namespace

DataParallel::~DataParallel() { *alive_ = false; }

void DataParallel::gather_units() {
  for (std::size_t g = 0; g < groups_.size(); ++g) gather_unit(g);  // no-op when gathered
}

void DataParallel::release() {
  if (fsdp_) gather_units();  // whole weights stay with the model
  *alive_ = false;
  // The Sequential entries FSDP wrapped call their units directly again.
  std::function<void(torch::nn::Module&)> walk = [&](torch::nn::Module& m) {
    if (auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(&m)) {
      for (auto it = seq->begin(); it != seq->end(); ++it) {
        if (auto* w = dynamic_cast<FsdpForwardImpl*>(it->ptr().get())) *it = w->inner();
      }
    }
    for (auto& c : m.children()) walk(*c);
  };
  if (fsdp_) walk(model_);
}

void DataParallel::wrap_sequential_units(torch::nn::Module& model) {
  std::function<void(torch::nn::Module&)> walk = [&](torch::nn::Module& m) {
    if (auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(&m)) {
      for (auto it = seq->begin(); it != seq->end(); ++it) {
        const void* child = it->ptr().get();
        for (std::size_t g = 0; g < groups_.size(); ++g) {
          FlatGroup& G = groups_[g];
          if (G.module != child || G.forward_managed) continue;
          G.forward_managed = true;
          // The Sequential's registered child stays the unit (its parameters, its name); only
          // the entry its forward calls changes.
          *it = torch::nn::AnyModule(std::make_shared<FsdpForwardImpl>(*it, this, g, G.name));
        }
      }
    }
    for (auto& c : m.children()) walk(*c);
  };
  walk(model);
}

void DataParallel::gather_unit(std::size_t g) {
  FlatGroup& G = groups_[g];
  if (G.gathered) return;
  at::NoGradGuard no_grad;
  G.allocate_full();
  const int span =
      tracer_.begin(result::SpanKind::all_gather, plan::Stream::collective, G.full_bytes(),
                    static_cast<int>(g), plan::CommPurpose::param_gather);
  comm_.all_gather(G.flat, G.shard.detach(), group_)->wait();
  tracer_.end(span);
  tracer_.memory(memory());
}

void DataParallel::after_unit_forward(std::size_t g, const at::Tensor& output) {
  if (output.requires_grad() && at::GradMode::is_enabled()) {
    // Runs when the output's gradient is complete, before the unit's own backward.
    output.register_hook([this, g](const at::Tensor&) { gather_unit(g); });
  }
  groups_[g].free_full();
  tracer_.memory(memory());
}

}  // namespace stratagem::accelerate
