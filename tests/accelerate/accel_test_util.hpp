#pragma once
// What the accelerate tests share: launching accel_check (or an example) with `stratagem
// launch`, and a temporary directory.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace stratagem::test {

struct Job {
  int code = 0;
  std::string output;
};

// Runs `stratagem launch` with `env` prepended (a shell command) and captures its output.
inline Job launch(const std::string& env, const std::string& flags, const std::string& program_args,
                  const std::string& program = STRATAGEM_ACCEL_CHECK) {
  const std::string cmd = env + " " + STRATAGEM_BINARY + " launch --main_process_port 0 --cpu " +
                          flags + " -- " + program + " " + program_args + " 2>&1";
  Job r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.output += buf.data();
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("stratagem-accel-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
  static inline int counter_ = 0;
};

}  // namespace stratagem::test
