#pragma once
// Data files from scenarios/ compiled into the binary, so presets and shipped scenarios
// work wherever the executable is copied. The files stay the source of truth.
#include <string_view>
#include <vector>

namespace stratagem::scenario {

struct EmbeddedFile {
  std::string_view path;  ///< relative to scenarios/, e.g. "presets/models.json"
  std::string_view content;
};

const std::vector<EmbeddedFile>& embedded_files();

}  // namespace stratagem::scenario
