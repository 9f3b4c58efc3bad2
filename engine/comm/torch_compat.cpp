#include "engine/comm/torch_compat.hpp"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#ifdef C10_USE_GLOG
#include <glog/logging.h>
#endif
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>

#include <unordered_map>
#include <unordered_set>

namespace stratagem::comm::compat {

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                                  std::chrono::milliseconds timeout) {
  // Assigned field by field: 2.x adds fields (masterListenFd, useLibUV) and reorders none of
  // these, so designated initialisers would not compile on both.
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = is_server;
  opts.numWorkers = c10::nullopt;
  opts.waitWorkers = false;
  // LibTorch 1.13 counts the connect timeout in whole seconds (truncating 500 ms to 0 and
  // failing at once); round up. Our waits pass their own timeouts.
  opts.timeout = std::chrono::ceil<std::chrono::seconds>(timeout);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // 2.4 made the libuv server the default; both serve the same protocol. Keep the classic
  // one, which is what 1.13 runs and what our tests exercise.
  opts.useLibUV = false;
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
}

std::string error_text(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

std::shared_ptr<void> add_post_accumulate_grad_hook(const at::Tensor& param,
                                                    std::function<void()> hook) {
  std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(param);
  if (!acc) return nullptr;  // not a leaf that requires grad
  acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [hook = std::move(hook)](const torch::autograd::variable_list& outputs,
                               const torch::autograd::variable_list&) {
        hook();
        return outputs;
      }));
  return acc;
}

void set_autocast(c10::DeviceType device_type, std::optional<at::ScalarType> dtype) {
  if (device_type == c10::DeviceType::CUDA) {
    if (dtype) at::autocast::set_autocast_gpu_dtype(*dtype);
    at::autocast::set_enabled(dtype.has_value());
  } else {
    if (dtype) at::autocast::set_autocast_cpu_dtype(*dtype);
    at::autocast::set_cpu_enabled(dtype.has_value());
  }
  if (!dtype) at::autocast::clear_cache();
}

bool cpu_bf16_autocast_works() {
  return TORCH_VERSION_MAJOR >= 2;
}

void resize_storage(const at::Tensor& t, std::size_t bytes) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == bytes) return;
  impl->set_data_ptr_noswap(impl->allocator()->allocate(bytes));
  impl->set_nbytes(bytes);
}

namespace {
thread_local bool profiling = false;  // start_op_profiler() turned the profiler on here
}  // namespace

void start_op_profiler() {
  namespace prof = torch::profiler::impl;
  if (profiling) stop_op_profiler();
  torch::autograd::profiler::enableProfilerLegacy(
      // FLOPs are computed from the ops' inputs, which the profiler keeps only with shapes on.
      prof::ProfilerConfig(prof::ProfilerState::CPU, /*report_input_shapes=*/true,
                           /*profile_memory=*/true, /*with_stack=*/false, /*with_flops=*/true));
  profiling = true;
}

std::vector<ProfiledEvent> stop_op_profiler() {
  using torch::autograd::profiler::EventKind;
  if (!profiling) return {};
  profiling = false;
  auto lists = torch::autograd::profiler::disableProfilerLegacy();
  // The legacy profiler records on the thread that enabled it (plus empty lists of others):
  // the longest list is ours.
  std::size_t best = 0;
  for (std::size_t i = 1; i < lists.size(); ++i) {
    if (lists[i].size() > lists[best].size()) best = i;
  }
  std::vector<ProfiledEvent> out;
  if (lists.empty()) return out;
  out.reserve(lists[best].size());
  for (auto& e : lists[best]) {
    ProfiledEvent p;
    switch (e.kind()) {
      case EventKind::PushRange:
        p.kind = ProfiledEvent::Kind::op_start;
        p.name = e.name();
        p.sequence_nr = e.sequenceNr();
        p.flops = static_cast<double>(e.flops());
        break;
      case EventKind::PopRange:
        p.kind = ProfiledEvent::Kind::op_end;
        break;
      case EventKind::MemoryAlloc:
        p.kind = ProfiledEvent::Kind::memory;
        p.bytes = e.cpuMemoryUsage() + e.cudaMemoryUsage();
        break;
      default:
        continue;  // marks ("__start_profile")
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<GraphNode> autograd_graph(const at::Tensor& output,
                                      const std::vector<at::Tensor>& params,
                                      const std::unordered_set<std::uint64_t>& bytes_for) {
  using torch::autograd::Node;
  std::unordered_map<const c10::TensorImpl*, int> index;
  for (std::size_t i = 0; i < params.size(); ++i) {
    index.emplace(params[i].unsafeGetTensorImpl(), static_cast<int>(i));
  }
  std::vector<GraphNode> out;
  std::shared_ptr<Node> root = output.grad_fn();
  if (!root) return out;
  std::vector<Node*> stack = {root.get()};
  std::unordered_set<Node*> seen = {root.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    GraphNode g;
    g.sequence_nr = node->sequence_nr();
    if (node->num_inputs() > 0 && bytes_for.count(g.sequence_nr) > 0) {
      try {
        g.output_bytes = static_cast<std::int64_t>(node->input_metadata(0).zeros_like().nbytes());
      } catch (const c10::Error&) {
        g.output_bytes = 0;  // a nested tensor: no dense shape
      }
    }
    for (const auto& edge : node->next_edges()) {
      Node* next = edge.function.get();
      if (!next) continue;
      if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(next)) {
        auto it = index.find(acc->variable.unsafeGetTensorImpl());
        if (it != index.end()) g.params.push_back(it->second);
        continue;
      }
      if (seen.insert(next).second) stack.push_back(next);
    }
    out.push_back(std::move(g));
  }
  return out;
}

void set_library_log_level(bool quiet) {
  FLAGS_caffe2_log_level = quiet ? 2 : 0;  // c10's logging (PyTorch 2.x builds without glog)
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = quiet ? google::GLOG_ERROR : google::GLOG_INFO;
#endif
}

}  // namespace stratagem::comm::compat
