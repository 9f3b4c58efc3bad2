// trace() and export_scenario(): a user's run as the RunResult the rest of Stratagem reads,
// and the model's measured shape as a scenario the simulator runs on any cluster.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <ATen/ATen.h>

#include "engine/accelerate/accelerator.hpp"
#include "engine/accelerate/data_parallel.hpp"
#include "engine/result/metrics.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/parallel_dims.hpp"

namespace stratagem::accelerate {

namespace {

// The scenario format's quick-form model needs at least this many parameters.
constexpr double kMinQuickFormParams = 1e3;

// Every process's string, on every process (lengths first, then padded bytes).
std::vector<std::string> all_gather_strings(comm::Communicator& comm, const c10::Device& device,
                                            const std::string& mine) {
  const int world = comm.world_size();
  at::Tensor len = at::tensor({static_cast<std::int64_t>(mine.size())}, at::kLong).to(device);
  at::Tensor lens = at::empty({world}, len.options());
  comm.all_gather(lens, len, comm::GroupSpec{})->wait();
  lens = lens.cpu();
  std::int64_t longest = 1;  // never an empty all-gather (Gloo divides by its size)
  for (int r = 0; r < world; ++r) longest = std::max(longest, lens[r].item<std::int64_t>());
  at::Tensor buf = at::zeros({longest}, at::kByte);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  buf = buf.to(device);
  at::Tensor all = at::empty({longest * world}, buf.options());
  comm.all_gather(all, buf, comm::GroupSpec{})->wait();
  all = all.cpu();
  std::vector<std::string> out;
  const char* p = static_cast<const char*>(all.data_ptr());
  for (int r = 0; r < world; ++r) {
    out.emplace_back(p + r * longest, static_cast<std::size_t>(lens[r].item<std::int64_t>()));
  }
  return out;
}

}  // namespace

void Accelerator::gather_measurement() {
  const bool mine = measurer_.measured() > 0;
  const auto texts = all_gather_strings(
      *comm_, device_, mine ? measured_to_json(measurer_.result()).dump() : std::string());
  std::vector<scenario::MeasuredModel> all;
  for (const auto& t : texts) {
    if (!t.empty()) all.push_back(measured_from_json(nlohmann::json::parse(t)));
  }
  measured_.reset();
  if (!all.empty()) measured_ = merge_measurements(all);
}

scenario::Scenario Accelerator::scenario(const ExportOptions* where) const {
  double params = 0;
  int units = 0;
  if (model_) {
    for (const auto& p : model_->parameters()) params += static_cast<double>(p.numel());
    units = std::max<int>(1, static_cast<int>(dp_ ? dp_->groups().size() : 1));
    if (dp_ && !dp_->sharded())
      units = std::max<int>(1, static_cast<int>(model_->children().size()));
  }
  std::int64_t local_batch = loader_ ? loader_->local_batch_size() : 1;
  int accum = options_.gradient_accumulation_steps;
  if (pipeline_) {  // micro-batches of the pipeline are its accumulation steps
    accum =
        options_.pipeline_micro_batches > 0 ? options_.pipeline_micro_batches : pipeline_->stages();
    local_batch = std::max<std::int64_t>(1, local_batch / accum);
  }
  int nodes = 1, per_node = env_.local_world_size;
  std::string cluster = device_.is_cuda() ? "dgx-a100-80gb" : "laptop-cpu";
  std::int64_t seq_len = 1;
  if (where) {
    cluster = where->cluster;
    nodes = where->nodes;
    per_node = where->gpus_per_node;
    seq_len = where->seq_len;
  } else {
    nodes = std::max(1, env_.world_size / std::max(1, env_.local_world_size));
  }
  const int processes = nodes * per_node;
  const int pp = pipeline_ ? std::min(pipeline_->stages(), processes) : 1;
  const int dp = std::max(1, processes / pp);
  if (pipeline_) units = std::max<int>(pp, static_cast<int>(model_->children().size()));
  // (A pipeline's stages each need a block; else the quick form.)
  const bool measured = measured_.has_value() && !measured_->blocks.empty() &&
                        static_cast<int>(measured_->blocks.size()) >= pp;
  if (measured) units = static_cast<int>(measured_->blocks.size());
  std::ostringstream about;
  about << "Measured by stratagem::accelerate::Accelerator on " << env_.world_size
        << " process(es) (" << (device_.is_cuda() ? "CUDA" : "CPU")
        << "): " << static_cast<std::int64_t>(params) << " parameters in " << units
        << " unit(s), micro-batch " << local_batch << " per process";
  const auto times = tracer_.step_times();
  if (!times.empty())
    about << ", median step " << std::setprecision(4) << result::median(times) << " s";
  nlohmann::json model = {{"name", model_name_.empty() ? "model" : model_name_}};
  if (measured) {
    about << ". Per unit and sample: parameters, forward FLOPs (LibTorch's profiler: matrix "
             "multiplies, convolutions, element-wise add/mul) and bytes the forward keeps "
             "(allocated minus freed within the unit), the processes' mean over one forward.";
    scenario::MeasuredModel mm = *measured_;
    mm.source = "LibTorch's op profiler over one forward on each of " +
                std::to_string(env_.world_size) + " process(es) (" +
                (device_.is_cuda() ? "CUDA" : "CPU") + "), stratagem::accelerate::Accelerator";
    model["measured"] = measured_to_json(mm);
    // The width of the stream between blocks, per token: GEMM shapes for the compute model.
    model["hidden"] = std::max<std::int64_t>(
        1, std::llround(mm.boundary_bytes / mm.element_bytes / static_cast<double>(seq_len)));
  } else {
    about << ". The model is written in the quick form (parameters and units; FLOPs follow the "
             "6·N per sample convention)";
    if (params < kMinQuickFormParams) {
      about << "; parameters raised to the format's minimum of 1000";
    }
    about << ".";
    model["params"] = std::max(params, kMinQuickFormParams);
    model["layers"] = units;
  }
  std::string sharding = scenario::to_string(options_.sharding);
  nlohmann::json j = {
      {"name", where && !where->name.empty() ? where->name : model_name_ + " (measured)"},
      {"description", about.str()},
      {"model", model},
      {"cluster", {{"preset", cluster}, {"nodes", nodes}, {"gpus_per_node", per_node}}},
      {"strategy",
       {{"dp", dp},
        {"pp", pp},
        {"micro_batch_size", local_batch},
        {"grad_accum", accum},
        {"sharding", sharding},
        {"mixed_precision", scenario::to_string(options_.mixed_precision)}}},
      {"training",
       {{"seq_len", seq_len}, {"global_batch", local_batch * accum * dp}, {"steps", 1}}}};
  return scenario::parse_scenario(j, "export_scenario");
}

result::RunResult Accelerator::trace() {
  gather_measurement();
  result::RunResult r;
  r.scenario = scenario(nullptr);
  r.executor = "real";
  r.hardware = device_.is_cuda() ? "cuda (accelerate)" : "cpu (accelerate)";
  double step_time = 0;
  result::RankResult mine = tracer_.last_step(env_.rank, &step_time);
  mine.node = env_.node_rank;
  const scenario::MeshCoord coord =
      scenario::MeshShape{.dp = dp_size(), .pp = 1, .tp = options_.tp_size, .cp = 1}.coord_of(
          env_.rank);
  mine.dp = coord.dp;
  mine.tp = coord.tp;
  // Each process's rank as a one-rank document; the main process's parser reads them back.
  result::RunResult one = r;
  one.ranks = {mine};
  const auto texts = all_gather_strings(*comm_, device_, result::to_json(one).dump());
  for (int k = 0; k < env_.world_size; ++k) {
    result::RunResult other =
        result::result_from_json(nlohmann::json::parse(texts[k]), "rank " + std::to_string(k));
    r.ranks.push_back(other.ranks.at(0));
  }
  // Step time: the median over steps after the first (warm-up), the slowest process's; the
  // spans are the last step's. Losses: the mean over processes of each step's.
  auto times = tracer_.step_times();
  if (times.size() > 1) times.erase(times.begin());
  if (!times.empty()) step_time = result::median(times);
  at::Tensor t = at::tensor({step_time}, at::kDouble).to(device_);
  comm_->all_reduce(t, comm::GroupSpec{}, comm::ReduceOp::max)->wait();
  r.metrics.step_time_s = t.cpu().item<double>();
  if (!losses_.empty()) {
    at::Tensor l = at::tensor(losses_, at::kDouble).to(device_);
    comm_->all_reduce(l, comm::GroupSpec{}, comm::ReduceOp::sum)->wait();
    l = l.cpu() / env_.world_size;
    for (std::int64_t i = 0; i < l.numel(); ++i) r.metrics.losses.push_back(l[i].item<double>());
  }
  if (r.metrics.step_time_s > 0) {
    r.metrics.samples_per_s =
        static_cast<double>(r.scenario.training.global_batch) / r.metrics.step_time_s;
    r.metrics.tokens_per_s =
        r.metrics.samples_per_s * static_cast<double>(r.scenario.training.seq_len);
  }
  // Communication not hidden behind compute on the main process: collective time outside
  // every compute span.
  const auto& spans = r.ranks.front().spans;
  double exposed = 0;
  for (const auto& s : spans) {
    if (!result::is_collective(s.kind)) continue;
    double covered = 0;
    for (const auto& c : spans) {
      if (!result::is_compute(c.kind)) continue;
      covered += std::max(0.0, std::min(s.end_s, c.end_s) - std::max(s.start_s, c.start_s));
    }
    exposed += std::max(0.0, (s.end_s - s.start_s) - covered);
  }
  r.metrics.exposed_comm_s = exposed;
  return r;
}

void Accelerator::save_trace(const std::string& path) {
  const result::RunResult r = trace();
  if (is_main_process()) result::save_result(r, path);
  wait_for_everyone();
}

void Accelerator::export_scenario(const std::string& path, const ExportOptions& options) {
  gather_measurement();
  const scenario::Scenario s = scenario(&options);
  if (is_main_process()) {
    std::ofstream out(path);
    if (!out) throw RuntimeError("cannot write " + path);
    out << scenario::to_json(s).dump(2) << "\n";
  }
  wait_for_everyone();
}

}  // namespace stratagem::accelerate
