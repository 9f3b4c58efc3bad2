#pragma once
// Runs the built `stratagem` binary and captures its exit code, stdout and stderr.
#include <string>

namespace stratagem::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// `args` is appended to the binary path as shell words (quote them yourself).
CliResult run_cli(const std::string& args);
/// A fresh temporary directory for one test.
std::string temp_dir(const std::string& name);
/// Writes `text` to `path`.
void write_file(const std::string& path, const std::string& text);

}  // namespace stratagem::test
