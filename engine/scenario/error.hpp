#pragma once
// Typed errors thrown by the libraries. The CLI turns each into one line and an exit code;
// libraries never exit.
#include <stdexcept>
#include <string>

namespace stratagem {

/// Invalid user input: a scenario, config or flag. `path` names where (a JSON path such as
/// "strategy.dp", or "file.json:3:7"). The CLI exits with code 2. Path and reason are kept
/// printable (see printable()): a key or value from the input cannot forge a second line,
/// cut the message short or flood the terminal.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string path, const std::string& reason);
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

/// A failure while running (I/O, a worker, a collective). The CLI exits with code 1.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `text` made safe to print on one line: control bytes (newline, NUL, escape, …) and bytes
/// that are not valid UTF-8 become `\n`, `\t`, `\r` or `\xNN`; text longer than `max_bytes`
/// keeps its start and says how much was cut. Idempotent, so wrapping an error again is safe.
/// SpecError applies it to its path and reason.
std::string printable(const std::string& text, std::size_t max_bytes = 480);

/// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace stratagem
