#pragma once
// What the accelerate tests share: launching accel_check (or an example) with `stratagem
// launch`, reading the parameters a program wrote, and a temporary directory.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// The fp32 parameters a test program wrote (its --out file); empty when there is none.
inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v;
  float x = 0;
  while (in.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
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
