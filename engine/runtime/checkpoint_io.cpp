#include "engine/runtime/checkpoint_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime::ckpt {

namespace fs = std::filesystem;

namespace {
constexpr const char* kMagic = "STRATAGEM-CKPT\n";
}

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
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

std::string encode_rank_file(nlohmann::json header,
                             const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             std::uint64_t* checksum) {
  nlohmann::json entries = nlohmann::json::array();
  std::string payload;
  for (const auto& [name, t] : tensors) {
    const at::Tensor cpu = t.detach().to(at::kCPU).contiguous();
    entries.push_back({{"name", name},
                       {"dtype", c10::toString(cpu.scalar_type())},
                       {"numel", cpu.numel()},
                       {"offset", payload.size()},
                       {"bytes", cpu.nbytes()}});
    payload.append(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
  }
  const std::uint64_t sum = fnv1a(payload.data(), payload.size());
  if (checksum) *checksum = sum;
  header["tensors"] = entries;
  header["checksum"] = hex(sum);
  const std::string head = header.dump();
  std::string bytes = kMagic;
  const std::uint64_t len = head.size();
  bytes.append(reinterpret_cast<const char*>(&len), 8);
  bytes += head;
  bytes += payload;
  return bytes;
}

const nlohmann::json* RankFile::find(const std::string& name) const {
  for (const auto& t : header.at("tensors")) {
    if (t.at("name").get<std::string>() == name) return &t;
  }
  return nullptr;
}

void RankFile::copy_into(const std::string& name, const at::Tensor& into) const {
  const nlohmann::json* e = find(name);
  if (!e) throw RuntimeError(path + " has no " + name);
  at::Tensor cpu = at::empty(into.sizes(), into.options().device(at::kCPU)).contiguous();
  const auto bytes = e->at("bytes").get<std::size_t>();
  if (bytes != cpu.nbytes() ||
      e->at("dtype").get<std::string>() != std::string(c10::toString(cpu.scalar_type()))) {
    throw RuntimeError(path + ": " + name + " does not match this rank's layout (" +
                       e->at("dtype").get<std::string>() + ", " + std::to_string(bytes) +
                       " bytes saved; " + c10::toString(cpu.scalar_type()) + ", " +
                       std::to_string(cpu.nbytes()) + " bytes here)");
  }
  std::memcpy(cpu.data_ptr(), payload.data() + e->at("offset").get<std::size_t>(), bytes);
  into.detach().copy_(cpu);
}

at::Tensor RankFile::tensor(const std::string& name, at::ScalarType dtype) const {
  const nlohmann::json* e = find(name);
  if (!e) throw RuntimeError(path + " has no " + name);
  at::Tensor t = at::empty({e->at("numel").get<std::int64_t>()}, at::TensorOptions().dtype(dtype));
  copy_into(name, t);
  return t;
}

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
  f.path = path;
  f.header = nlohmann::json::parse(bytes.substr(magic + 8, header_len));
  f.payload = bytes.substr(magic + 8 + header_len);
  const std::uint64_t sum = fnv1a(f.payload.data(), f.payload.size());
  if (hex(sum) != f.header.at("checksum").get<std::string>()) {
    throw RuntimeError(path + " is damaged (checksum mismatch)");
  }
  return f;
}

void write_manifest(comm::Communicator& comm, const std::string& dir,
                    const std::string& rank_file_name, std::size_t bytes, std::uint64_t checksum,
                    bool writer, nlohmann::json manifest, const c10::Device& device) {
  const int rank = comm.rank(), world = comm.world_size();
  auto info = at::zeros({world, 2}, at::TensorOptions().dtype(at::kLong));
  info[rank][0].fill_(static_cast<std::int64_t>(bytes));
  info[rank][1].fill_(static_cast<std::int64_t>(checksum));
  at::Tensor d = info.to(device);
  comm.all_reduce(d, comm::GroupSpec{}, comm::ReduceOp::sum)
      ->wait();  // also the barrier before the manifest
  info = d.cpu();
  if (writer) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      std::string file = rank_file_name;
      const auto at = file.find("%d");
      if (at != std::string::npos) file.replace(at, 2, std::to_string(r));
      ranks.push_back(
          {{"file", file},
           {"bytes", info[r][0].item<std::int64_t>()},
           {"checksum", hex(static_cast<std::uint64_t>(info[r][1].item<std::int64_t>()))}});
    }
    manifest["ranks"] = ranks;
    write_atomically((fs::path(dir) / "manifest.json").string(), manifest.dump(2) + "\n");
  }
  comm.barrier(comm::GroupSpec{});
}

std::optional<Chosen> choose_newest_sound(comm::Communicator& comm, const std::string& dir,
                                          const std::string& prefix,
                                          const std::string& rank_file_name,
                                          const c10::Device& device) {
  const auto steps = complete_steps(dir, prefix);
  std::size_t skipped = 0;
  for (std::size_t k = 0;; ++k) {
    Chosen c;
    c.step = k < steps.size() ? steps[k] : -1;
    std::string problem;
    if (c.step >= 0) {
      c.dir = (fs::path(dir) / (prefix + std::to_string(c.step))).string();
      try {
        c.manifest = nlohmann::json::parse(read_file((fs::path(c.dir) / "manifest.json").string()));
        c.file = parse_rank_file((fs::path(c.dir) / rank_file_name).string());
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
    at::Tensor agree = at::tensor({static_cast<double>(c.step), -static_cast<double>(c.step),
                                   problem.empty() ? 0.0 : 1.0},
                                  at::TensorOptions().dtype(at::kDouble))
                           .to(device);
    comm.all_reduce(agree, comm::GroupSpec{}, comm::ReduceOp::max)->wait();
    agree = agree.cpu();
    if (agree[0].item<double>() != -agree[1].item<double>()) {
      throw RuntimeError("ranks see different " + std::string(k == 0 ? "newest " : "") +
                         "checkpoints in " + dir + " (is the directory shared by all machines?)");
    }
    if (c.step < 0) {
      if (skipped == 0) return std::nullopt;
      throw RuntimeError("every complete checkpoint in " + dir + " is damaged (" +
                         std::to_string(skipped) + " tried, newest first)");
    }
    if (agree[2].item<double>() == 0) return c;
    if (!problem.empty()) {
      std::cerr << "warning: rank " << comm.rank() << ": skipping checkpoint " << c.dir << ": "
                << problem << std::endl;
    }
    ++skipped;
  }
}

std::vector<std::int64_t> complete_steps(const std::string& dir, const std::string& prefix) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::int64_t n = -1;
    try {
      std::size_t used = 0;
      n = std::stoll(name.substr(prefix.size()), &used);
      if (used != name.size() - prefix.size()) continue;
    } catch (const std::exception&) {
      continue;
    }
    if (!fs::exists(entry.path() / "manifest.json", ec)) continue;
    steps.push_back(n);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

std::int64_t latest_complete(const std::string& dir, const std::string& prefix) {
  const auto steps = complete_steps(dir, prefix);
  return steps.empty() ? -1 : steps.front();
}

}  // namespace stratagem::runtime::ckpt
