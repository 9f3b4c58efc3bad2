#pragma once
// Subcommands register themselves: each apps/cmd_*.cpp defines one static Registration, so
// adding a command touches only its own file.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace stratagem::cli {

struct Command {
  std::string name;
  std::string help;
  int order = 100;  ///< position in --help
  /// Adds options to `sub` and returns the function that runs the command (exit code).
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& registry();

struct Registration {
  explicit Registration(Command c) { registry().push_back(std::move(c)); }
};

}  // namespace stratagem::cli
