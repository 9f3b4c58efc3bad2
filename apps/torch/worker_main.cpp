#include "apps/torch/worker_main.hpp"

#include "engine/launch/heartbeat.hpp"
#include "engine/runtime/model_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "engine/comm/store.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/measure/unit_timing.hpp"
#include "engine/result/metrics.hpp"
#include "engine/runtime/checkpoint.hpp"
#include "engine/runtime/host_memory.hpp"
#include "engine/runtime/threads.hpp"
#include "engine/runtime/worker.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/presets.hpp"

namespace stratagem::runtime {

namespace {

nlohmann::json scenario_json(const std::string& file_or_name) {
  // The same lookup as scenario::load_scenario: a file, else a shipped scenario's name.
  std::error_code ec;
  if (std::filesystem::exists(file_or_name, ec)) return scenario::read_json_file(file_or_name);
  if (file_or_name.find('/') != std::string::npos ||
      file_or_name.find(".json") != std::string::npos) {
    throw SpecError(file_or_name, "no such file");
  }
  return scenario::parse_json_text(scenario::shipped_scenario_text(file_or_name),
                                   file_or_name + ".json");
}

scenario::Precision parse_precision(const std::string& s) {
  if (s == "no") return scenario::Precision::no;
  if (s == "fp16") return scenario::Precision::fp16;
  if (s == "bf16") return scenario::Precision::bf16;
  throw SpecError("--mixed_precision", "expected no, fp16 or bf16, got \"" + s + "\"");
}

constexpr auto kPublishPeriod = std::chrono::milliseconds(200);

// Publishes the op this rank is at, a few times a second, so that a rank that gives up
// waiting can say where every other rank was.
class OpPublisher {
 public:
  OpPublisher(std::shared_ptr<comm::Store> store, int rank)
      : store_(std::move(store)), rank_(rank) {
    thread_ = std::thread([this] { loop(); });
  }
  ~OpPublisher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void set(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(what);
    ++version_;
  }
  /// Publishes the current state now (before reading the others' after a failure).
  void flush() {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mu_);
      text = current_;
    }
    try {
      store_->set(key(rank_), text);
    } catch (const std::exception&) {
      // The store is gone: the report will say "(no report)" for this rank.
    }
  }
  static std::string key(int rank) { return "stratagem/op/" + std::to_string(rank); }

 private:
  void loop() {
    std::uint64_t published = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, kPublishPeriod, [&] { return stop_; });
      if (version_ == published) continue;
      published = version_;
      const std::string text = current_;
      lock.unlock();
      try {
        store_->set(key(rank_), text);
      } catch (const std::exception&) {
        // The store went away (the job is ending); nothing left to publish to.
      }
      lock.lock();
    }
  }

  std::shared_ptr<comm::Store> store_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string current_;
  std::uint64_t version_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

std::string where_ranks_were(comm::Store& store, int world) {
  // Let the other ranks' publishers catch up with where they are now.
  std::this_thread::sleep_for(2 * kPublishPeriod);
  std::ostringstream s;
  s << "ranks were last at:";
  for (int r = 0; r < world; ++r) {
    s << " rank " << r << " ";
    try {
      s << store.get(OpPublisher::key(r), std::chrono::milliseconds(2000));
    } catch (const std::exception&) {
      s << "(no report)";
    }
    s << ";";
  }
  return s.str();
}

double median_after_first(const std::vector<double>& v) {
  return result::median(std::vector<double>(v.begin() + (v.size() > 1 ? 1 : 0), v.end()));
}

}  // namespace

std::string progress_line(std::int64_t step, std::int64_t steps, double loss, double samples_per_s,
                          double tokens_per_s) {
  std::ostringstream s;
  s << "【train】 epoch：1/1 step：" << step << "/" << steps << " loss：" << std::fixed
    << std::setprecision(6) << loss << std::setprecision(1) << " samples/s：" << samples_per_s
    << " tokens/s：" << tokens_per_s;
  return s.str();
}

scenario::Scenario job_scenario(const WorkerArgs& args, bool on_cpu, int nodes,
                                int processes_per_node, bool measure_device) {
  nlohmann::json j = scenario_json(args.scenario);
  if (!j.is_object()) throw SpecError(args.scenario, "a scenario is a JSON object");
  if (!args.mixed_precision.empty()) {
    (void)parse_precision(args.mixed_precision);
    auto& st = j["strategy"];
    st["mixed_precision"] = args.mixed_precision;
    if (args.mixed_precision != "fp16") {
      for (const char* key :
           {"initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"}) {
        st.erase(key);
      }
    }
  }
  if (args.seed) j["training"]["seed"] = *args.seed;
  if (args.steps > 0) j["training"]["steps"] = args.steps;
  if (on_cpu) {
    // Each worker process plays one device of a CPU "cluster"; the links stay the scenario's
    // (the runtime does not read them).
    if (!j.contains("cluster")) throw SpecError("cluster", "missing required key");
    const auto original =
        scenario::resolve_preset(scenario::PresetKind::cluster, j["cluster"], "cluster");
    nlohmann::json c = {{"name", "cpu"},
                        {"nodes", nodes},
                        {"gpus_per_node", processes_per_node},
                        {"gpu", original.contains("gpu") ? original["gpu"] : nlohmann::json()}};
    for (const char* link : {"intra_node", "inter_node"}) {
      if (original.contains(link)) c[link] = original[link];
    }
    if (!c.contains("inter_node") && c.contains("intra_node")) c["inter_node"] = c["intra_node"];
    if (measure_device)
      c["gpu"] = scenario::to_json(measure::measure_cpu_device(processes_per_node));
    j["cluster"] = c;
  }
  scenario::Scenario parsed = scenario::parse_scenario(j, args.scenario);
  check_runtime_model(parsed.model);
  check_runtime_strategy(parsed.strategy);
  return parsed;
}

int run_worker(const WorkerArgs& args) {
  launch::Heartbeat::start_from_env();
  const launch::DistEnv env = launch::read_dist_env();
  const bool cuda = !args.cpu && at::hasCUDA();
  const c10::Device device =
      cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
           : c10::Device(c10::kCPU);
  if (!cuda) {
    set_cpu_threads(measure::cpu_threads_per_process(env.local_world_size));
    keep_freed_host_memory();
  }
  scenario::Scenario scenario =
      job_scenario(args, !cuda, env.world_size / env.local_world_size, env.local_world_size, true);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  launch::Heartbeat::progress("rendezvous at " + env.master_addr + ":" +
                              std::to_string(env.master_port));
  auto store = comm::rendezvous(env, timeout);
  launch::Heartbeat::progress("connecting the communicator");
  auto comm = comm::make_communicator(env, store, cuda ? "nccl" : "gloo", timeout);
  if (args.measure_units) {
    scenario.cluster.gpu.measured_units = {
        measure::measure_units_on_all_ranks(scenario, *comm, device, 12)};
  }
  const int rank = env.rank;
  const std::int64_t steps = scenario.training.steps;
  std::unique_ptr<Trainer> trainer;
  OpPublisher publisher(store->connect_client(), rank);

  TrainOptions o;
  o.steps = static_cast<int>(steps);
  o.data_file = args.data;
  o.optimizer = OptimizerConfig::defaults(scenario.strategy.optimizer, args.lr);
  o.device = device;
  o.timeout = timeout;
  o.save_dir = args.save_dir;
  o.save_every = args.save_every;
  o.resume_dir = args.resume;
  o.kill_during_save_step = args.kill_during_save_step;
  o.kill_during_save_rank = args.kill_during_save_rank;
  o.stall_at_step = args.stall_at_step;
  o.stall_rank = args.stall_rank;
  o.on_op_start = [&](const plan::Op& op) { publisher.set(describe_op(trainer->plan(), op.id)); };
  o.on_activity = [&](const std::string& what) { publisher.set(what); };
  std::int64_t first_step = -1;  // the first step run: a resume may fall back past the newest
  o.on_step = [&](std::int64_t step, double loss, double seconds) {
    if (first_step < 0) first_step = step;
    if (rank != 0) return;
    const std::int64_t done = step - first_step + 1;
    if (done % std::max(1, args.log_every) != 0 && done != steps) return;
    const double samples = static_cast<double>(scenario.training.global_batch);
    std::cout << progress_line(step + 1, first_step + steps, loss, samples / seconds,
                               samples * static_cast<double>(scenario.training.seq_len) / seconds)
              << std::endl;
  };
  trainer = std::make_unique<Trainer>(scenario, *comm, o);
  if (rank == 0) {
    std::cout << "stratagem worker: " << describe(env) << "; " << comm->backend() << " on "
              << device.str() << "; data: " << trainer->data().describe() << std::endl;
  }
  TrainResult res;
  try {
    res = trainer->run();
  } catch (const RuntimeError& e) {
    publisher.flush();
    throw RuntimeError(std::string(e.what()) + "\n" + where_ranks_were(*store, env.world_size));
  }

  if (!args.output.empty()) {
    // Every rank hands its trace to rank 0 through the store.
    result::RunResult mine;
    mine.scenario = scenario;
    mine.executor = "real";
    mine.ranks.push_back(res.trace);
    store->set("stratagem/result/" + std::to_string(rank), result::to_json(mine).dump());
    if (rank == 0) {
      result::RunResult r;
      r.scenario = scenario;
      r.executor = "real";
      r.hardware = cuda ? "cuda (" + comm->backend() + ")"
                        : scenario.cluster.gpu.name + ", " + comm->backend();
      for (int q = 0; q < env.world_size; ++q) {
        const auto doc = nlohmann::json::parse(store->get("stratagem/result/" + std::to_string(q)));
        r.ranks.push_back(result::result_from_json(doc, "rank " + std::to_string(q)).ranks.at(0));
      }
      r.metrics = result::compute_metrics(r, trainer->plan().model_flops_per_step);
      // A step's time is the median over the measured steps after the first (warm-up).
      auto& m = r.metrics;
      m.step_time_s = median_after_first(res.step_seconds);
      if (m.step_time_s > 0) {
        m.samples_per_s = static_cast<double>(scenario.training.global_batch) / m.step_time_s;
        m.tokens_per_s = static_cast<double>(scenario.tokens_per_step()) / m.step_time_s;
        m.mfu = m.peak_flops.flops_per_s > 0
                    ? m.model_flops_per_step /
                          (m.step_time_s * env.world_size * m.peak_flops.flops_per_s)
                    : 0.0;
      }
      m.losses = res.losses;
      m.step_times_s = res.step_seconds;
      result::save_result(r, args.output);
      std::cout << "wrote " << args.output << " (step time " << std::setprecision(4)
                << m.step_time_s << " s, " << m.tokens_per_s << " tokens/s, final loss "
                << (res.losses.empty() ? 0.0 : res.losses.back()) << "; communication "
                << m.comm_s * 1e3 << " ms per rank in the traced step, "
                << (m.comm_s > 0 ? 100.0 * (1.0 - m.exposed_comm_s / m.comm_s) : 0.0)
                << " % hidden behind compute)" << std::endl;
    }
  }
  comm->barrier(comm::GroupSpec{});
  return 0;
}

}  // namespace stratagem::runtime
