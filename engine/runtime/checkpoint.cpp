#include "engine/runtime/checkpoint.hpp"

#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "engine/runtime/checkpoint_io.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestFormat = "stratagem-checkpoint";
constexpr int kVersion = 1;

using ckpt::fnv1a;
using ckpt::hex;
using ckpt::read_file;

std::string step_dir(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / ("step-" + std::to_string(step))).string();
}

std::string rank_file(int rank) {
  return "rank-" + std::to_string(rank) + ".ckpt";
}

at::Tensor cpu_rng_state() {
  return at::detail::getDefaultCPUGenerator().get_state();
}

struct Entry {
  std::string name;
  at::Tensor tensor;  // the live tensor (device) to save from or load into
};

std::vector<Entry> entries(Executor& ex) {
  std::vector<Entry> out;
  for (auto& [name, t] : ex.state().state_tensors()) out.push_back({name, t});
  out.push_back({"cpu_rng_state", cpu_rng_state()});
  return out;
}

nlohmann::json scaler_json(const DynamicLossScaler* scaler) {
  if (!scaler) return nullptr;
  const auto& s = scaler->state();
  return {{"scale", s.scale},
          {"iteration", s.iteration},
          {"last_overflow_iteration", s.last_overflow_iteration},
          {"hysteresis_left", s.hysteresis_left}};
}

}  // namespace

std::string scenario_fingerprint(const scenario::Scenario& s) {
  nlohmann::json j = {{"model", scenario::to_json(s.model)},
                      {"strategy", scenario::to_json(s.strategy)},
                      {"seq_len", s.training.seq_len},
                      {"global_batch", s.training.global_batch},
                      {"seed", s.training.seed},
                      {"world", s.world_size()}};
  const std::string text = j.dump();
  return hex(fnv1a(text.data(), text.size()));
}

void save_checkpoint(const std::string& dir, std::int64_t step, Executor& ex,
                     comm::Communicator& comm, const SaveOptions& options) {
  const int rank = comm.rank(), world = comm.world_size();
  const std::string sdir = step_dir(dir, step);
  std::error_code ec;
  fs::create_directories(sdir, ec);
  if (ec) throw RuntimeError("cannot create " + sdir + ": " + ec.message());

  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& e : entries(ex)) tensors.emplace_back(e.name, e.tensor);
  const auto& scenario = ex.plan().scenario;
  nlohmann::json header = {
      {"version", kVersion},
      {"rank", rank},
      {"world", world},
      {"step", step},
      {"fingerprint", scenario_fingerprint(scenario)},
      {"optimizer_steps", ex.state().optimizer_steps()},
      {"loss_scaler", scaler_json(ex.scaler())},
      // Data is a function of (seed, sample index): the position is the next step's first
      // global sample.
      {"data", {{"next_step", step}, {"next_sample", step * scenario.training.global_batch}}}};
  std::uint64_t sum = 0;
  const std::string bytes = ckpt::encode_rank_file(std::move(header), tensors, &sum);
  ckpt::write_atomically((fs::path(sdir) / rank_file(rank)).string(), bytes,
                         options.kill_after_temp_file);
  // The manifest marks the checkpoint complete: the first rank of each node writes it once
  // every rank's file is in place.
  const nlohmann::json manifest = {{"format", kManifestFormat},
                                   {"version", kVersion},
                                   {"step", step},
                                   {"world", world},
                                   {"scenario", scenario.name},
                                   {"tp", ex.plan().layout.tp},
                                   {"fingerprint", scenario_fingerprint(scenario)}};
  ckpt::write_manifest(comm, sdir, "rank-%d.ckpt", bytes.size(), sum,
                       ex.plan().layout.coords[rank].local_rank == 0, manifest,
                       ex.units().device());
}

std::int64_t latest_complete_step(const std::string& dir) {
  return ckpt::latest_complete(dir, "step-");
}

namespace {

// Loads checkpoint `sdir` (already verified) into `ex`; its next step.
std::int64_t load_from(const std::string& sdir, const nlohmann::json& manifest,
                       const ckpt::RankFile& f, Executor& ex, int world) {
  const auto& scenario = ex.plan().scenario;
  if (manifest.at("world").get<int>() != world) {
    throw SpecError("--resume", sdir + " was written by " +
                                    std::to_string(manifest.at("world").get<int>()) +
                                    " ranks, this job has " + std::to_string(world));
  }
  const int tp = ex.plan().layout.tp;
  if (manifest.contains("tp") && manifest.at("tp").get<int>() != tp) {
    throw SpecError("--resume", sdir + " was written with tp = " +
                                    std::to_string(manifest.at("tp").get<int>()) +
                                    " (each rank's file holds its tensor-parallel slices); this "
                                    "job has tp = " + std::to_string(tp) +
                                    ": resume with the same tp");
  }
  if (manifest.at("fingerprint").get<std::string>() != scenario_fingerprint(scenario)) {
    throw SpecError("--resume", sdir +
                                    " was written for another model, strategy, batch or seed "
                                    "(scenario \"" +
                                    manifest.at("scenario").get<std::string>() + "\")");
  }
  for (const auto& e : entries(ex)) {
    if (e.name == "cpu_rng_state") {
      at::Tensor state = e.tensor.clone();
      f.copy_into(e.name, state);
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(state);
    } else {
      f.copy_into(e.name, e.tensor);
    }
  }
  ex.state().set_optimizer_steps(f.header.at("optimizer_steps").get<std::int64_t>());
  if (DynamicLossScaler* scaler = ex.scaler()) {
    const auto& js = f.header.at("loss_scaler");
    DynamicLossScaler::State s;
    s.scale = js.at("scale").get<double>();
    s.iteration = js.at("iteration").get<std::int64_t>();
    s.last_overflow_iteration = js.at("last_overflow_iteration").get<std::int64_t>();
    s.hysteresis_left = js.at("hysteresis_left").get<int>();
    scaler->restore(s);
  }
  return f.header.at("data").at("next_step").get<std::int64_t>();
}

}  // namespace

std::int64_t load_checkpoint(const std::string& dir, Executor& ex, comm::Communicator& comm) {
  const auto chosen = ckpt::choose_newest_sound(comm, dir, "step-", rank_file(comm.rank()),
                                                ex.units().device());
  if (!chosen) throw SpecError("--resume", "no complete checkpoint in " + dir);
  return load_from(chosen->dir, chosen->manifest, chosen->file, ex, comm.world_size());
}

}  // namespace stratagem::runtime
