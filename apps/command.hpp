#pragma once
// Subcommands register themselves: each apps/cmd_*.cpp defines one static Registration, so
// adding a command touches only its own file.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
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

/// Flag values checked when parsed (CLI11 reports a failure as "--flag: ..." with exit 2):
/// a finite number >= 0 — CLI11's NonNegativeNumber lets nan through (every comparison with it
/// is false) — and a count >= 1.
inline CLI::Validator finite_non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "expected a number, got '" + text + "'";
        if (!std::isfinite(x) || x < 0) return "must be a finite number >= 0, got " + text;
        return "";
      },
      "NUMBER>=0");
}
/// Counts: CLI11's own range check (1 to INT_MAX).
inline CLI::Validator at_least_one() { return CLI::Range(1, std::numeric_limits<int>::max()); }

}  // namespace stratagem::cli
