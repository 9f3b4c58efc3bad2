// save_state / load_state: the Accelerator's checkpoints in the runtime's crash-safe format
// (engine/runtime/checkpoint_io.hpp): DIR/checkpoint-<optimizer steps>/rank-<r>.ckpt, then
// manifest.json. Each process saves what it owns: full parameters under DDP, its shards under
// ZeRO/FSDP, its optimizer's state (torch::serialize archive), plus the loss scaler, the CPU
// RNG and the data position.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>

#include "engine/accelerate/accelerator.hpp"
#include "engine/accelerate/data_parallel.hpp"
#include "engine/runtime/checkpoint_io.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace fs = std::filesystem;
namespace ckpt = runtime::ckpt;

namespace {

constexpr const char* kFormat = "stratagem-accelerate-state";
constexpr int kVersion = 1;
constexpr const char* kPrefix = "checkpoint-";

at::Tensor bytes_tensor(const std::string& s) {
  at::Tensor t = at::empty({static_cast<std::int64_t>(s.size())}, at::kByte);
  if (!s.empty()) std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel()));
}

}  // namespace

void Accelerator::save_state(const std::string& dir) {
  if (!dp_) throw SpecError("save_state", "call prepare() first");
  const int rank = env_.rank, world = env_.world_size;
  const std::string sdir = (fs::path(dir) / (kPrefix + std::to_string(optimizer_steps_))).string();
  std::error_code ec;
  fs::create_directories(sdir, ec);
  if (ec) throw RuntimeError("cannot create " + sdir + ": " + ec.message());

  auto tensors = dp_->state_tensors();
  {
    torch::serialize::OutputArchive archive;
    dp_->stepping_optimizer().save(archive);
    std::ostringstream os;
    archive.save_to(os);
    tensors.emplace_back("optimizer", bytes_tensor(os.str()));
  }
  tensors.emplace_back("cpu_rng_state", at::detail::getDefaultCPUGenerator().get_state());
  for (std::size_t i = 0; i < save_extra_.size(); ++i) {
    torch::serialize::OutputArchive archive;
    save_extra_[i](archive);
    std::ostringstream os;
    archive.save_to(os);
    tensors.emplace_back("registered/" + std::to_string(i), bytes_tensor(os.str()));
  }
  nlohmann::json schedulers = nlohmann::json::array(), lrs = nlohmann::json::array();
  for (const auto& sch : schedulers_) schedulers.push_back(sch->steps());
  for (const auto& g : optimizer_->param_groups()) lrs.push_back(g.options().get_lr());
  nlohmann::json scaler = nullptr;
  if (scaler_) {
    const auto& s = scaler_->state();
    scaler = {{"scale", s.scale},
              {"iteration", s.iteration},
              {"last_overflow_iteration", s.last_overflow_iteration},
              {"hysteresis_left", s.hysteresis_left}};
  }
  nlohmann::json data = nullptr, loaders = nlohmann::json::array();
  for (std::size_t i = 0; i < loaders_.size(); ++i) {
    const DataLoaderBase* l = loaders_[i];
    loaders.push_back({{"name", loader_names_[i]},
                       {"epoch", l->position().epoch},
                       {"batch", l->position().batch}});
  }
  if (loader_) data = loaders.front();
  nlohmann::json header = {{"format", kFormat},
                           {"version", kVersion},
                           {"rank", rank},
                           {"world", world},
                           {"sharding", scenario::to_string(options_.sharding)},
                           {"optimizer_steps", optimizer_steps_},
                           {"micro_steps", micro_step_},
                           {"accumulation_cycle", cycle_},
                           {"schedulers", schedulers},
                           {"learning_rates", lrs},
                           {"registered", save_extra_.size()},
                           {"loss_scaler", scaler},
                           {"data", data},
                           {"loaders", loaders}};
  std::uint64_t sum = 0;
  const std::string bytes = ckpt::encode_rank_file(std::move(header), tensors, &sum);
  ckpt::write_atomically((fs::path(sdir) / ("rank-" + std::to_string(rank) + ".ckpt")).string(),
                         bytes);
  const nlohmann::json manifest = {{"format", kFormat},
                                   {"version", kVersion},
                                   {"world", world},
                                   {"sharding", scenario::to_string(options_.sharding)},
                                   {"tp_size", options_.tp_size},
                                   {"optimizer_steps", optimizer_steps_},
                                   {"model", model_name_}};
  ckpt::write_manifest(*comm_, sdir, "rank-%d.ckpt", bytes.size(), sum, env_.local_rank == 0,
                       manifest, device_);
}

void Accelerator::load_state(const std::string& dir) {
  if (!dp_) throw SpecError("load_state", "call prepare() first");
  const int world = env_.world_size;
  // The newest sound checkpoint: a damaged one is skipped with a warning (ckpt::choose_newest_sound).
  const auto chosen = ckpt::choose_newest_sound(
      *comm_, dir, kPrefix, "rank-" + std::to_string(env_.rank) + ".ckpt", device_);
  if (!chosen) throw SpecError("load_state", "no complete checkpoint in " + dir);
  const std::string& sdir = chosen->dir;
  const auto& manifest = chosen->manifest;
  if (manifest.at("world").get<int>() != world) {
    throw SpecError("load_state", sdir + " was written by " +
                                      std::to_string(manifest.at("world").get<int>()) +
                                      " processes, this job has " + std::to_string(world));
  }
  if (manifest.value("tp_size", 1) != options_.tp_size) {
    throw SpecError("load_state", sdir + " was written with tp_size " +
                                      std::to_string(manifest.value("tp_size", 1)) +
                                      " (each process's file holds its tensor-parallel slices), "
                                      "this job runs tp_size " + std::to_string(options_.tp_size));
  }
  if (manifest.at("sharding").get<std::string>() != scenario::to_string(options_.sharding)) {
    throw SpecError("load_state", sdir + " was written with sharding " +
                                      manifest.at("sharding").get<std::string>() +
                                      ", this job runs " + scenario::to_string(options_.sharding));
  }
  const ckpt::RankFile& f = chosen->file;
  {
    at::NoGradGuard no_grad;
    for (auto& [name, t] : dp_->state_tensors()) f.copy_into(name, t);
  }
  {
    const std::string blob = tensor_bytes(f.tensor("optimizer", at::kByte));
    torch::serialize::InputArchive archive;
    archive.load_from(blob.data(), blob.size());
    dp_->stepping_optimizer().load(archive);
  }
  {
    at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
    f.copy_into("cpu_rng_state", rng);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng);
  }
  optimizer_steps_ = f.header.at("optimizer_steps").get<std::int64_t>();
  micro_step_ = f.header.at("micro_steps").get<std::int64_t>();
  cycle_ = f.header.value("accumulation_cycle",
                          micro_step_ % options_.gradient_accumulation_steps);
  const std::size_t registered = f.header.value("registered", std::size_t{0});
  if (registered != load_extra_.size()) {
    throw SpecError("load_state", "the checkpoint carries " + std::to_string(registered) +
                                      " objects registered for checkpointing, this job " +
                                      std::to_string(load_extra_.size()) +
                                      ": register the same ones before load_state");
  }
  for (std::size_t i = 0; i < load_extra_.size(); ++i) {
    const std::string blob = tensor_bytes(f.tensor("registered/" + std::to_string(i), at::kByte));
    torch::serialize::InputArchive archive;
    archive.load_from(blob.data(), blob.size());
    load_extra_[i](archive);
  }
  restore_schedulers(f.header);
  if (scaler_ && !f.header.at("loss_scaler").is_null()) {
    const auto& js = f.header.at("loss_scaler");
    runtime::DynamicLossScaler::State s;
    s.scale = js.at("scale").get<double>();
    s.iteration = js.at("iteration").get<std::int64_t>();
    s.last_overflow_iteration = js.at("last_overflow_iteration").get<std::int64_t>();
    s.hysteresis_left = js.at("hysteresis_left").get<int>();
    scaler_->restore(s);
  }
  // Each prepared loader gets its own position back, in the order they were prepared;
  // checkpoints written before several loaders were recorded restore the first.
  auto position_of = [](const nlohmann::json& p) {
    return DataPosition{p.at("epoch").get<std::int64_t>(), p.at("batch").get<std::int64_t>()};
  };
  const nlohmann::json& saved = f.header.contains("loaders") ? f.header.at("loaders")
                                                             : nlohmann::json::array();
  if (!saved.empty() && saved.size() != loaders_.size()) {
    throw SpecError("load_state", "the checkpoint recorded " + std::to_string(saved.size()) +
                                      " data loaders but " + std::to_string(loaders_.size()) +
                                      " were prepared: prepare the same loaders before loading");
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    // By name (a named loader may be prepared in another order); unnamed ones by order.
    std::size_t at = i;
    if (saved[i].contains("name")) {
      const auto name = saved[i].at("name").get<std::string>();
      const auto it = std::find(loader_names_.begin(), loader_names_.end(), name);
      if (it == loader_names_.end()) {
        throw SpecError("load_state", "the checkpoint has data loader \"" + name +
                                          "\", which was not prepared in this job");
      }
      at = static_cast<std::size_t>(it - loader_names_.begin());
    }
    loaders_[at]->set_position(position_of(saved[i]));
  }
  if (saved.empty() && loader_ && !f.header.at("data").is_null()) {
    loader_->set_position(position_of(f.header.at("data")));
  }
  dp_->after_load();
  dp_->zero_grad();
}

void Accelerator::restore_schedulers(const nlohmann::json& header) {
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& saved = header.contains("schedulers") ? header.at("schedulers") : none;
  if (saved.size() != schedulers_.size()) {
    throw SpecError("load_state", "the checkpoint carries " + std::to_string(saved.size()) +
                                      " learning-rate schedulers, this job prepared " +
                                      std::to_string(schedulers_.size()));
  }
  if (schedulers_.empty()) return;
  optimizer_->reset_learning_rates();
  for (std::size_t i = 0; i < saved.size(); ++i) schedulers_[i]->replay(saved[i].get<std::int64_t>());
  // A scheduler whose rate is not a function of its step count: the saved rates win.
  const auto& lrs = header.at("learning_rates");
  auto& groups = optimizer_->param_groups();
  bool differ = false;
  for (std::size_t g = 0; g < groups.size() && g < lrs.size(); ++g) {
    const double want = lrs[g].get<double>();
    if (groups[g].options().get_lr() != want) {
      differ = true;
      groups[g].options().set_lr(want);
    }
  }
  if (differ) {
    optimizer_->sync_learning_rates();
    print("warning: the learning-rate scheduler's replay did not reach the saved learning "
          "rates; the saved rates were restored");
  }
}

void Accelerator::register_for_checkpointing(Checkpointable& object) {
  save_extra_.push_back([&object](torch::serialize::OutputArchive& a) { object.save(a); });
  load_extra_.push_back([&object](torch::serialize::InputArchive& a) { object.load(a); });
}

void Accelerator::register_for_checkpointing(torch::nn::Module& module) {
  save_extra_.push_back([&module](torch::serialize::OutputArchive& a) { module.save(a); });
  load_extra_.push_back([&module](torch::serialize::InputArchive& a) { module.load(a); });
}

}  // namespace stratagem::accelerate
