#pragma once
// Running the stratagem executable from runtime tests: a fresh work directory per test, and the
// command's exit code, stdout, stderr and wall time.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace stratagem::test {

struct Cli {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// An empty directory under the temp dir, named after the test and this process.
inline std::filesystem::path work_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("stratagem-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// Runs `stratagem args` with stdout and stderr captured in `dir` and stdin closed.
inline Cli stratagem(const std::string& args, const std::filesystem::path& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  // This host's measured CPU profile (apps/host_profile.hpp) goes to a cache of the tests' own,
  // not the user's, unless the test chose one.
  const std::string cache =
      std::getenv("STRATAGEM_CACHE_DIR") != nullptr
          ? ""
          : "STRATAGEM_CACHE_DIR=" +
                (std::filesystem::temp_directory_path() / "stratagem-test-cache").string() + " ";
  const std::string cmd = cache + std::string(STRATAGEM_BINARY) + " " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  Cli r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace stratagem::test
