// The `stratagem` executable: thin subcommands over the libraries. Errors become one line
// on stderr; input errors exit 2, run-time failures 1.
#include <algorithm>
#include <iostream>
#include <memory>

#include "apps/command.hpp"
#include "apps/version.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace stratagem::cli

int main(int argc, char** argv) {
  using namespace stratagem;
  CLI::App app{"Stratagem: run, simulate and see distributed training strategies", "stratagem"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.fallthrough(false);
  // Flag errors look like every other error: one line, "error: " first, exit 2.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + printable(cli::flag_error_text(e)) + " (see --help)\n";
  });
  auto& commands = cli::registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.order < b.order; });
  std::function<int()> run;
  for (auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    auto fn = std::make_shared<std::function<int()>>(command.setup(*sub));
    sub->callback([&run, fn] { run = *fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const SpecError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  try {
    return run ? run() : 0;
  } catch (const SpecError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
