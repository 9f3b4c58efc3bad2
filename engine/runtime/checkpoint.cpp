#include "engine/runtime/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "engine/spec/error.hpp"

namespace stratagem::runtime {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "STRATAGEM-CKPT\n";
constexpr const char* kManifestFormat = "stratagem-checkpoint";
constexpr int kVersion = 1;

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << std::hex << v;
  return s.str();
}

std::string step_dir(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / ("step-" + std::to_string(step))).string();
}

std::string rank_file(int rank) {
  return "rank-" + std::to_string(rank) + ".ckpt";
}

// Writes `bytes` to `path` under a temporary name, flushed to disk, then renames it.
void write_atomically(const std::string& path, const std::string& bytes, bool kill_before_rename) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw RuntimeError("cannot write " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw RuntimeError("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw RuntimeError("cannot flush " + tmp + ": " + std::strerror(errno));
  }
  if (kill_before_rename) ::kill(::getpid(), SIGKILL);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw RuntimeError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  const int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // make the rename itself durable
    ::close(dfd);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

at::Tensor cpu_rng_state() {
  return at::detail::getDefaultCPUGenerator().get_state();
}

// A small CPU tensor all-reduced over the world on the communicator's device (NCCL takes CUDA
// tensors only), returned on the CPU.
at::Tensor all_reduced(Communicator& comm, const at::Tensor& t, ReduceOp op,
                       const c10::Device& device) {
  at::Tensor d = t.to(device);
  comm.all_reduce(d, GroupSpec{}, op)->wait();
  return d.cpu();
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

struct RankFile {
  nlohmann::json header;
  std::string payload;
};

RankFile parse_rank_file(const std::string& path) {
  const std::string bytes = read_file(path);
  const std::size_t magic = std::strlen(kMagic);
  if (bytes.size() < magic + 8 || bytes.compare(0, magic, kMagic) != 0) {
    throw RuntimeError(path + " is not a stratagem checkpoint shard");
  }
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + magic, 8);
  if (magic + 8 + header_len > bytes.size()) throw RuntimeError(path + " is truncated");
  RankFile f;
  f.header = nlohmann::json::parse(bytes.substr(magic + 8, header_len));
  f.payload = bytes.substr(magic + 8 + header_len);
  const std::uint64_t sum = fnv1a(f.payload.data(), f.payload.size());
  if (hex(sum) != f.header.at("checksum").get<std::string>()) {
    throw RuntimeError(path + " is damaged (checksum mismatch)");
  }
  return f;
}

}  // namespace

std::string scenario_fingerprint(const spec::Scenario& s) {
  nlohmann::json j = {{"model", spec::to_json(s.model)}, {"strategy", spec::to_json(s.strategy)},
                      {"seq_len", s.training.seq_len},   {"global_batch", s.training.global_batch},
                      {"seed", s.training.seed},         {"world", s.world_size()}};
  const std::string text = j.dump();
  return hex(fnv1a(text.data(), text.size()));
}

void save_checkpoint(const std::string& dir, std::int64_t step, Executor& ex, Communicator& comm,
                     const SaveOptions& options) {
  const int rank = comm.rank(), world = comm.world_size();
  const std::string sdir = step_dir(dir, step);
  std::error_code ec;
  fs::create_directories(sdir, ec);
  if (ec) throw RuntimeError("cannot create " + sdir + ": " + ec.message());

  nlohmann::json tensors = nlohmann::json::array();
  std::string payload;
  for (const auto& e : entries(ex)) {
    const at::Tensor cpu = e.tensor.detach().to(at::kCPU).contiguous();
    tensors.push_back({{"name", e.name},
                       {"dtype", c10::toString(cpu.scalar_type())},
                       {"numel", cpu.numel()},
                       {"offset", payload.size()},
                       {"bytes", cpu.nbytes()}});
    payload.append(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
  }
  const std::uint64_t sum = fnv1a(payload.data(), payload.size());
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
      {"data", {{"next_step", step}, {"next_sample", step * scenario.training.global_batch}}},
      {"tensors", tensors},
      {"checksum", hex(sum)}};
  const std::string head = header.dump();
  std::string bytes = kMagic;
  const std::uint64_t len = head.size();
  bytes.append(reinterpret_cast<const char*>(&len), 8);
  bytes += head;
  bytes += payload;
  write_atomically((fs::path(sdir) / rank_file(rank)).string(), bytes,
                   options.kill_after_temp_file);

  // Every rank's file size and checksum, for the manifest.
  auto info = at::zeros({world, 2}, at::TensorOptions().dtype(at::kLong));
  info[rank][0].fill_(static_cast<std::int64_t>(bytes.size()));
  info[rank][1].fill_(static_cast<std::int64_t>(sum));
  info = all_reduced(comm, info, ReduceOp::sum, ex.units().device());
  // The manifest marks the checkpoint complete: the first rank of each node writes it once
  // every rank's file is in place (the all-reduce above is the barrier).
  if (ex.plan().layout.coords[rank].local_rank == 0) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      ranks.push_back(
          {{"file", rank_file(r)},
           {"bytes", info[r][0].item<std::int64_t>()},
           {"checksum", hex(static_cast<std::uint64_t>(info[r][1].item<std::int64_t>()))}});
    }
    nlohmann::json manifest = {{"format", kManifestFormat},
                               {"version", kVersion},
                               {"step", step},
                               {"world", world},
                               {"scenario", scenario.name},
                               {"fingerprint", scenario_fingerprint(scenario)},
                               {"ranks", ranks}};
    write_atomically((fs::path(sdir) / "manifest.json").string(), manifest.dump(2) + "\n", false);
  }
  comm.barrier(GroupSpec{});
}

std::int64_t latest_complete_step(const std::string& dir) {
  std::int64_t best = -1;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return -1;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    std::int64_t step = -1;
    try {
      step = std::stoll(name.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    if (!fs::exists(entry.path() / "manifest.json", ec)) continue;
    best = std::max(best, step);
  }
  return best;
}

std::int64_t load_checkpoint(const std::string& dir, Executor& ex, Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  const std::int64_t step = latest_complete_step(dir);
  // All ranks must resume the same step.
  auto agree = at::full({2}, static_cast<double>(step), at::TensorOptions().dtype(at::kDouble));
  agree[1].fill_(-static_cast<double>(step));
  agree = all_reduced(comm, agree, ReduceOp::max, ex.units().device());
  if (agree[0].item<double>() != -agree[1].item<double>()) {
    throw RuntimeError("ranks see different newest checkpoints in " + dir +
                       " (is the directory shared by all machines?)");
  }
  if (step < 0) throw SpecError("--resume", "no complete checkpoint in " + dir);
  const std::string sdir = step_dir(dir, step);
  const auto manifest =
      nlohmann::json::parse(read_file((fs::path(sdir) / "manifest.json").string()));
  const auto& scenario = ex.plan().scenario;
  if (manifest.at("world").get<int>() != world) {
    throw SpecError("--resume", sdir + " was written by " +
                                    std::to_string(manifest.at("world").get<int>()) +
                                    " ranks, this job has " + std::to_string(world));
  }
  if (manifest.at("fingerprint").get<std::string>() != scenario_fingerprint(scenario)) {
    throw SpecError("--resume", sdir +
                                    " was written for another model, strategy, batch or seed "
                                    "(scenario \"" +
                                    manifest.at("scenario").get<std::string>() + "\")");
  }
  const std::string path = (fs::path(sdir) / rank_file(rank)).string();
  const RankFile f = parse_rank_file(path);
  const auto& entry_list = f.header.at("tensors");
  for (const auto& e : entries(ex)) {
    const nlohmann::json* found = nullptr;
    for (const auto& t : entry_list) {
      if (t.at("name").get<std::string>() == e.name) found = &t;
    }
    if (!found) throw RuntimeError(path + " has no " + e.name);
    const auto bytes = found->at("bytes").get<std::size_t>();
    const auto offset = found->at("offset").get<std::size_t>();
    at::Tensor cpu = e.tensor.detach().to(at::kCPU).contiguous().clone();
    if (bytes != cpu.nbytes() ||
        found->at("dtype").get<std::string>() != std::string(c10::toString(cpu.scalar_type()))) {
      throw RuntimeError(path + ": " + e.name + " does not match this rank's layout");
    }
    std::memcpy(cpu.data_ptr(), f.payload.data() + offset, bytes);
    if (e.name == "cpu_rng_state") {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(cpu);
    } else {
      e.tensor.copy_(cpu);
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

}  // namespace stratagem::runtime
