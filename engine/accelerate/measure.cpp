#include "engine/accelerate/measure.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "engine/accelerate/data_parallel.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::accelerate {

namespace {

using comm::compat::GraphNode;
using comm::compat::ProfiledEvent;

constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

bool has_params(torch::nn::Module& m) { return !m.parameters(/*recurse=*/true).empty(); }

// The parameter-owning entries of a Sequential, with their paths under `prefix`.
std::vector<BlockCandidate> sequential_blocks(const std::string& prefix,
                                              torch::nn::Module& seq) {
  std::vector<BlockCandidate> out;
  for (const auto& child : seq.named_children()) {
    if (!has_params(*child.value())) continue;
    out.push_back({prefix.empty() ? child.key() : prefix + "." + child.key(),
                   child.value()->parameters(true)});
  }
  return out;
}

}  // namespace

std::vector<BlockCandidate> find_blocks(torch::nn::Module& model, const DataParallel* dp) {
  if (dp && dp->fsdp()) {
    std::vector<BlockCandidate> out;
    for (const auto& g : dp->groups()) {
      // Group names are "path (Type)": the path names the unit.
      if (g.name != "root") out.push_back({g.name.substr(0, g.name.find(" (")), g.params});
    }
    if (!out.empty()) return out;
  }
  std::vector<BlockCandidate> best;
  if (dynamic_cast<torch::nn::SequentialImpl*>(&model)) best = sequential_blocks("", model);
  for (const auto& m : model.named_modules("", /*include_self=*/false)) {
    if (!dynamic_cast<torch::nn::SequentialImpl*>(m.value().get())) continue;
    auto blocks = sequential_blocks(m.key(), *m.value());
    if (blocks.size() > best.size()) best = std::move(blocks);
  }
  if (best.size() >= 2) return best;
  std::vector<BlockCandidate> children;
  for (const auto& child : model.named_children()) {
    if (has_params(*child.value())) {
      children.push_back({child.key(), child.value()->parameters(true)});
    }
  }
  if (children.size() >= best.size() && !children.empty()) return children;
  if (!best.empty()) return best;
  return {{model.name(), model.parameters(true)}};
}

scenario::MeasuredModel attribute_forward(const std::vector<ProfiledEvent>& events,
                                          const std::vector<GraphNode>& graph,
                                          const std::vector<int>& owner,
                                          const std::vector<std::int64_t>& numel,
                                          const std::vector<std::string>& blocks,
                                          std::int64_t samples,
                                          std::vector<std::uint64_t>* last_ops) {
  const int B = static_cast<int>(blocks.size());
  // Where in the event list the op with autograd sequence number s started: the first op
  // that peeked a number >= s (ops peek the number their autograd node will take).
  std::vector<std::int64_t> running;  // running max of op starts' sequence numbers
  std::vector<std::size_t> at;        // their event indices
  std::int64_t high = -1;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.kind != ProfiledEvent::Kind::op_start || e.sequence_nr < 0) continue;
    high = std::max(high, e.sequence_nr);
    running.push_back(high);
    at.push_back(i);
  }
  auto position = [&](std::uint64_t seq) -> std::size_t {
    const auto it = std::lower_bound(running.begin(), running.end(),
                                     static_cast<std::int64_t>(std::min<std::uint64_t>(
                                         seq, std::numeric_limits<std::int64_t>::max())));
    return it == running.end() ? events.size() : at[it - running.begin()];
  };

  // First read of every parameter, and each block's start.
  std::vector<std::size_t> first_use(owner.size(), kNever);
  std::vector<std::size_t> node_pos(graph.size());
  for (std::size_t n = 0; n < graph.size(); ++n) {
    node_pos[n] = position(graph[n].sequence_nr);
    for (int p : graph[n].params) {
      if (p >= 0 && p < static_cast<int>(first_use.size())) {
        first_use[p] = std::min(first_use[p], node_pos[n]);
      }
    }
  }
  std::vector<std::size_t> start(B, kNever);
  for (std::size_t p = 0; p < owner.size(); ++p) {
    if (owner[p] >= 0) start[owner[p]] = std::min(start[owner[p]], first_use[p]);
  }
  std::size_t first_block = kNever, last_block = 0;
  for (int b = 0; b < B; ++b) {
    if (start[b] == kNever) continue;
    first_block = std::min(first_block, start[b]);
    last_block = std::max(last_block, start[b]);
  }
  // The root's parameters: read after the last block started → the output unit (which starts
  // at the first of those reads); else the input unit.
  std::size_t output_start = kNever;
  scenario::MeasuredModel m;
  m.input.name = "input";
  m.output.name = "output";
  for (std::size_t p = 0; p < owner.size(); ++p) {
    if (owner[p] >= 0) continue;
    const bool after = first_block != kNever && first_use[p] != kNever && first_use[p] > last_block;
    (after ? m.output : m.input).params += static_cast<double>(numel[p]);
    if (after) output_start = std::min(output_start, first_use[p]);
  }

  // Units in the order the forward ran them: -1 input, 0..B-1 blocks, B output.
  std::vector<std::pair<std::size_t, int>> order;
  for (int b = 0; b < B; ++b) {
    if (start[b] != kNever) order.emplace_back(start[b], b);
  }
  std::stable_sort(order.begin(), order.end());
  if (output_start != kNever) order.emplace_back(output_start, B);
  std::vector<double> flops(B + 2, 0.0), bytes(B + 2, 0.0);  // index unit + 1
  std::size_t next = 0;
  int current = -1;
  for (std::size_t i = 0; i < events.size(); ++i) {
    while (next < order.size() && order[next].first <= i) current = order[next++].second;
    const auto& e = events[i];
    if (e.kind == ProfiledEvent::Kind::op_start) flops[current + 1] += e.flops;
    if (e.kind == ProfiledEvent::Kind::memory) bytes[current + 1] += static_cast<double>(e.bytes);
  }
  // Each block's last autograd op: its output is what the next block reads.
  if (last_ops) {
    last_ops->clear();
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (order[k].second == B) continue;
      const std::size_t end = k + 1 < order.size() ? order[k + 1].first : events.size();
      std::uint64_t last = 0;
      bool found = false;
      for (std::size_t n = 0; n < graph.size(); ++n) {
        if (node_pos[n] >= order[k].first && node_pos[n] < end &&
            (!found || graph[n].sequence_nr > last)) {
          last = graph[n].sequence_nr;
          found = true;
        }
      }
      if (found) last_ops->push_back(last);
    }
  }

  const double per = 1.0 / static_cast<double>(std::max<std::int64_t>(1, samples));
  auto fill = [&](scenario::MeasuredUnit& u, int index) {
    u.forward_flops = flops[index + 1] * per;
    u.activation_bytes = std::max(0.0, bytes[index + 1]) * per;
  };
  fill(m.input, -1);
  fill(m.output, B);
  std::vector<int> ran;
  for (const auto& o : order) {
    if (o.second < B) ran.push_back(o.second);
  }
  for (int b = 0; b < B; ++b) {  // blocks the forward never read go last
    if (start[b] == kNever) ran.push_back(b);
  }
  for (int b : ran) {
    scenario::MeasuredUnit u;
    u.name = blocks[b];
    for (std::size_t p = 0; p < owner.size(); ++p) {
      if (owner[p] == b) u.params += static_cast<double>(numel[p]);
    }
    fill(u, b);
    m.blocks.push_back(std::move(u));
  }
  return m;
}

ModelMeasurer::~ModelMeasurer() { disarm(); }

bool ModelMeasurer::arm() {
  if (unavailable_) return false;
  try {
    comm::compat::start_op_profiler();
    armed_ = true;
  } catch (const std::exception&) {
    armed_ = false;  // a profiler of the user's is on: measure nothing
    unavailable_ = true;
  }
  return armed_;
}

void ModelMeasurer::disarm() {
  if (!armed_) return;
  armed_ = false;
  try {
    comm::compat::stop_op_profiler();
  } catch (const std::exception&) {
  }
}

void ModelMeasurer::finish(const at::Tensor& loss, torch::nn::Module& model, const DataParallel* dp,
                           std::int64_t samples, double element_bytes) {
  if (!armed_) return;
  armed_ = false;
  const auto events = comm::compat::stop_op_profiler();
  const std::vector<BlockCandidate> blocks = find_blocks(model, dp);
  std::vector<at::Tensor> params;
  std::vector<int> owner;
  std::vector<std::int64_t> numel;
  std::unordered_map<const c10::TensorImpl*, int> block_of;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    for (const auto& p : blocks[b].params) block_of.emplace(p.unsafeGetTensorImpl(), b);
  }
  for (const auto& p : model.parameters(true)) {
    const auto it = block_of.find(p.unsafeGetTensorImpl());
    params.push_back(p);
    owner.push_back(it == block_of.end() ? -1 : it->second);
    numel.push_back(p.numel());
  }
  std::vector<std::string> names;
  for (const auto& b : blocks) names.push_back(b.name);
  const auto graph = comm::compat::autograd_graph(loss, params);
  std::vector<std::uint64_t> last_ops;
  scenario::MeasuredModel m =
      attribute_forward(events, graph, owner, numel, names, samples, &last_ops);
  // The boundary: the median of the blocks' outputs (shapes read once, outside the profiler).
  const std::unordered_set<std::uint64_t> wanted(last_ops.begin(), last_ops.end());
  std::vector<double> outputs;
  for (const auto& n : comm::compat::autograd_graph(loss, params, wanted)) {
    if (wanted.count(n.sequence_nr) && n.output_bytes > 0) {
      outputs.push_back(static_cast<double>(n.output_bytes));
    }
  }
  if (outputs.empty()) return;  // no block produced a differentiable output: keep the last
  std::sort(outputs.begin(), outputs.end());
  m.boundary_bytes = outputs[outputs.size() / 2] / static_cast<double>(std::max<std::int64_t>(1, samples));
  m.element_bytes = element_bytes;
  result_ = std::move(m);
  ++measured_;
}

nlohmann::json measured_to_json(const scenario::MeasuredModel& m) {
  scenario::ModelSpec spec_model;
  spec_model.measured = std::make_shared<scenario::MeasuredModel>(m);
  return scenario::to_json(spec_model).at("measured");
}

scenario::MeasuredModel measured_from_json(const nlohmann::json& j) {
  return *scenario::parse_model({{"measured", j}}, "measured").measured;
}

scenario::MeasuredModel merge_measurements(const std::vector<scenario::MeasuredModel>& all) {
  scenario::MeasuredModel out;
  if (all.empty()) return out;
  out.element_bytes = all.front().element_bytes;
  out.input = all.front().input;
  out.output = all.front().output;
  struct Sum {
    scenario::MeasuredUnit unit;
    int count = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Sum> by_name;
  std::vector<double> boundaries;
  for (std::size_t k = 0; k < all.size(); ++k) {
    const auto& m = all[k];
    if (m.boundary_bytes > 0) boundaries.push_back(m.boundary_bytes);
    if (k > 0) {
      for (auto [to, from] : {std::pair{&out.input, &m.input}, std::pair{&out.output, &m.output}}) {
        to->forward_flops += from->forward_flops;
        to->activation_bytes += from->activation_bytes;
      }
    }
    for (const auto& b : m.blocks) {
      auto [it, fresh] = by_name.try_emplace(b.name);
      if (fresh) {
        order.push_back(b.name);
        it->second.unit = b;
      } else {
        it->second.unit.forward_flops += b.forward_flops;
        it->second.unit.activation_bytes += b.activation_bytes;
      }
      ++it->second.count;
    }
  }
  const double n = static_cast<double>(all.size());
  for (scenario::MeasuredUnit* u : {&out.input, &out.output}) {
    u->forward_flops /= n;
    u->activation_bytes /= n;
  }
  auto number = [](const std::string& name) {
    const bool digits = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
    return digits ? std::stoll(name) : std::numeric_limits<long long>::max();
  };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return number(a) < number(b);
  });
  for (const auto& name : order) {
    Sum& s = by_name.at(name);
    s.unit.forward_flops /= s.count;
    s.unit.activation_bytes /= s.count;
    out.blocks.push_back(s.unit);
  }
  std::sort(boundaries.begin(), boundaries.end());
  if (!boundaries.empty()) out.boundary_bytes = boundaries[boundaries.size() / 2];
  return out;
}

}  // namespace stratagem::accelerate
