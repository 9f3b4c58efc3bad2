// Commands that need LibTorch (run, worker, commbench, ...) are built into stratagem-runtime;
// here they are registered by name and exec that executable with the same arguments, so
// `stratagem --help` lists them and their own --help comes from the real implementation.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "apps/forward_runtime.hpp"

#include "apps/command.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {

std::string runtime_executable() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw RuntimeError("cannot find this executable (/proc/self/exe)");
  std::string path(self, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "stratagem-runtime";
}

void exec_runtime(const std::vector<std::string>& args) {
  const std::string exe = runtime_executable();
  std::vector<std::string> full = {exe};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  throw RuntimeError("cannot run " + exe + ": " + std::strerror(errno));
}

namespace {

const std::map<std::string, std::string>& descriptions() {
  static const std::map<std::string, std::string> d = {
      {"run", "Train a scenario for real on local worker processes (Gloo on CPUs, NCCL on GPUs)"},
      {"worker", "Run one rank of a job started by torchrun, Slurm or mpirun"},
      {"commbench", "Benchmark collectives like nccl-tests (Gloo or NCCL)"},
      {"calibrate", "Measure this machine and write a hardware profile for the simulator"},
      {"validate", "Run scenarios for real and compare with the simulator's prediction"},
  };
  return d;
}

struct Forwarders {
  Forwarders() {
    std::stringstream names(STRATAGEM_RUNTIME_COMMANDS);
    std::string name;
    int order = 50;
    while (std::getline(names, name, ',')) {
      // cmd_validate_measured.cpp and cmd_calibrate_measured.cpp forward these themselves.
      if (name == "validate" || name == "calibrate") continue;
      const auto it = descriptions().find(name);
      const std::string help =
          it != descriptions().end() ? it->second : "Real-runtime command (stratagem-runtime)";
      registry().push_back({name, help, order++, [name](CLI::App& sub) {
                              sub.prefix_command();
                              sub.set_help_flag();  // --help goes to stratagem-runtime
                              return std::function<int()>([name, &sub]() -> int {
                                std::vector<std::string> args = {name};
                                for (const auto& a : sub.remaining()) args.push_back(a);
                                exec_runtime(args);
                              });
                            }});
    }
  }
};
const Forwarders forwarders;

}  // namespace
}  // namespace stratagem::cli
