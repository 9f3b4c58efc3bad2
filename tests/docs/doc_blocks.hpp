#pragma once
// The shell blocks of a Markdown page and what the docs test does with each.
//
// Convention (docs/architecture.md, "Tested docs", states it for authors): every fenced block
// whose info string is `sh`, `bash` or `console` carries a marker on the line above its fence:
//   <!-- test: run -->            executed by the docs test
//   <!-- test: skip REASON -->    not executed; REASON says why (needs a GPU, takes minutes, …)
// A `sh`/`bash` block may be followed (blank lines allowed) by `<!-- test: output -->` and a
// fenced block showing its output. In a `console` block, lines starting with `$ ` are the
// commands and the others their output. Shown output is checked by shape (output_matches).
#include <optional>
#include <string>
#include <vector>

namespace stratagem::docs {

struct DocBlock {
  std::string file;  ///< path relative to the repository root
  int line = 0;      ///< 1-based line of the opening fence
  std::string lang;  ///< sh, bash or console
  enum class Mark { none, run, skip, malformed } mark = Mark::none;
  std::string reason;  ///< skip: why; malformed: what is wrong with the marker
  std::string script;  ///< the commands to run
  std::optional<std::vector<std::string>> expected;  ///< shown output, when there is some
};

/// The shell blocks of `text` (a Markdown page read from `file`).
std::vector<DocBlock> extract_blocks(const std::string& file, const std::string& text);

/// A line's shape: every number (digits with `.`, `,` or `:` between groups) becomes `#`, a
/// table rule (a run of `─`, `-` or `=`) becomes one such character, runs of white space
/// become one space, leading and trailing space go.
std::string shape_of(const std::string& line);

/// Whether `actual` shows the `expected` lines: each expected line that is neither empty nor
/// `...`/`…` has the shape of some actual line, in order (other actual lines may come between).
/// On failure, `missing` is the first expected line not found.
bool output_matches(const std::vector<std::string>& expected, const std::string& actual,
                    std::string* missing = nullptr);

}  // namespace stratagem::docs
