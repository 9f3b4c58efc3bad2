#pragma once
// stratagem-runtime, the executable next to this one that holds the LibTorch commands.
#include <string>
#include <vector>

namespace stratagem::cli {

/// Its path (same directory as this executable).
std::string runtime_executable();
/// Replaces this process with `stratagem-runtime args...`; throws RuntimeError if it cannot.
[[noreturn]] void exec_runtime(const std::vector<std::string>& args);

}  // namespace stratagem::cli
