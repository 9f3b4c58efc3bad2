#include "apps/two_form_command.hpp"

#include "apps/command.hpp"

#include <algorithm>
#include <iostream>

#include "engine/scenario/error.hpp"
#ifdef STRATAGEM_RUNTIME_COMMANDS
#include "apps/forward_runtime.hpp"
#endif

namespace stratagem::cli {

std::function<int()> two_form_command(CLI::App& sub, const std::string& command,
                                      const std::string& flag, const std::string& local_usage,
                                      std::function<int(const std::vector<std::string>&)> local) {
  sub.prefix_command();
  sub.set_help_flag();  // --help: stratagem-runtime's, or the local form's without a runtime
  return [&sub, command, flag, local_usage, local = std::move(local)]() -> int {
    const std::vector<std::string> args = sub.remaining();
    const std::string name = "--" + flag;
    const bool here = std::any_of(args.begin(), args.end(), [&](const std::string& a) {
      return a == name || a.rfind(name + "=", 0) == 0;
    });
    if (here) return local(args);
#ifdef STRATAGEM_RUNTIME_COMMANDS
    std::vector<std::string> forward = {command};
    forward.insert(forward.end(), args.begin(), args.end());
    exec_runtime(forward);
#else
    throw SpecError(command, "this build has no real runtime (LibTorch was not found): only `" +
                                 local_usage + "` works here");
#endif
  };
}

bool parse_local_form(CLI::App& app, const std::vector<std::string>& remaining,
                      const std::string& command) {
  std::vector<std::string> reversed(remaining.rbegin(), remaining.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::cout << app.help();
      return false;
    }
    throw SpecError(command, cli::flag_error_text(e));
  }
  return true;
}

}  // namespace stratagem::cli
