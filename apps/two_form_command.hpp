#pragma once
// Commands with two forms: one that runs here when its arguments name a flag (`validate
// --measured`, `calibrate --measured`: the simulator only) and one that stratagem-runtime runs
// (the real runtime's `validate` and `calibrate`). Both forms' registrations share this.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace stratagem::cli {

/// What a two-form command's setup returns: when the arguments hold `--<flag>` (or
/// `--<flag>=…`), `local(args)` with CLI11's remaining arguments; otherwise `command args…`
/// in stratagem-runtime, or, in a build without it, an error saying that only `local_usage`
/// works here.
std::function<int()> two_form_command(CLI::App& sub, const std::string& command,
                                      const std::string& flag, const std::string& local_usage,
                                      std::function<int(const std::vector<std::string>&)> local);

/// Parses the local form's arguments (`remaining`, as CLI11 leaves them, last first) into
/// `app`: false when it printed its help (--help), a parse error as SpecError(command, …).
bool parse_local_form(CLI::App& app, const std::vector<std::string>& remaining,
                      const std::string& command);

}  // namespace stratagem::cli
