#pragma once
// A scenario as the commands load it: its warnings (keys legal but doing nothing here,
// scenario::Scenario::warnings) printed on stderr, one "warning: " line each, before the
// command's own output.
#include <iostream>
#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::cli {

inline scenario::Scenario print_warnings(scenario::Scenario s) {
  for (const std::string& w : s.warnings) std::cerr << "warning: " << printable(w) << "\n";
  return s;
}

/// scenario::load_scenario, its warnings printed.
inline scenario::Scenario load_scenario(const std::string& file_or_name) {
  return print_warnings(scenario::load_scenario(file_or_name));
}

/// scenario::load_scenario_to_describe, its warnings printed.
inline scenario::Scenario load_scenario_to_describe(const std::string& file_or_name) {
  return print_warnings(scenario::load_scenario_to_describe(file_or_name));
}

}  // namespace stratagem::cli
