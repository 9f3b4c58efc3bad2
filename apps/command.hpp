#pragma once
// Subcommands register themselves: each apps/cmd_*.cpp defines one static Registration, so
// adding a command touches only its own file.
#include <cerrno>
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
/// A whole number in [min, max], in our words (CLI11's Range says "Value abc not in range" of a
/// value that is no number at all).
inline CLI::Validator whole_number(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0') return "expected a whole number, got '" + text + "'";
        if (errno == ERANGE || x < min || x > max) {
          const bool open_ended = max == std::numeric_limits<int>::max();
          const bool low = errno != ERANGE && x < min;
          return "must be " +
                 (!open_ended ? "from " + std::to_string(min) + " to " + std::to_string(max)
                  : low       ? "at least " + std::to_string(min)
                              : "at most " + std::to_string(max)) +
                 ", got " + text;
        }
        return "";
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}
/// A number in [min, max], as whole_number.
inline CLI::Validator number_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "expected a number, got '" + text + "'";
        if (!(x >= min && x <= max)) {
          return "must be from " + CLI::detail::to_string(min) + " to " +
                 CLI::detail::to_string(max) + ", got " + text;
        }
        return "";
      },
      "NUMBER in [" + CLI::detail::to_string(min) + " - " + CLI::detail::to_string(max) + "]");
}
/// Counts: 1 to INT_MAX.
inline CLI::Validator at_least_one() {
  return whole_number(1, std::numeric_limits<int>::max());
}

/// A flag error in the one-line style of every other input error: CLI11's own wording where
/// it is ours already, its "Could not convert: --x = v" (a value of the wrong type for a flag
/// without a validator) said as "--x: expected a number, got 'v'".
inline std::string flag_error_text(const CLI::Error& e) {
  const std::string what = e.what();
  const std::string prefix = "Could not convert: ";
  if (what.rfind(prefix, 0) == 0) {
    const auto eq = what.find(" = ", prefix.size());
    if (eq != std::string::npos) {
      return what.substr(prefix.size(), eq - prefix.size()) + ": expected a number, got '" +
             what.substr(eq + 3) + "'";
    }
  }
  return what;
}

}  // namespace stratagem::cli
