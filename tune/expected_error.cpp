#include "tune/expected_error.hpp"

#include <nlohmann/json.hpp>

#include "engine/scenario/embedded_files.hpp"

namespace stratagem::tune {

namespace {

const nlohmann::json& accuracy() {
  static const nlohmann::json doc = [] {
    for (const auto& f : scenario::embedded_files()) {
      if (f.path == "presets/accuracy.json") {
        return nlohmann::json::parse(f.content, nullptr, /*allow_exceptions=*/false);
      }
    }
    return nlohmann::json();
  }();
  return doc;
}

}  // namespace

std::optional<ExpectedError> expected_error(const std::string& gpu, const std::string& stack) {
  const nlohmann::json& doc = accuracy();
  if (!doc.is_object() || !doc.contains("groups") || !doc["groups"].is_array()) {
    return std::nullopt;
  }
  for (const auto& g : doc["groups"]) {
    if (g.value("gpu", "") != gpu || g.value("stack", "") != stack) continue;
    ExpectedError e;
    e.gpu = gpu;
    e.stack = stack;
    e.runs = g.value("runs", 0);
    e.median_abs = g.value("median_abs_error", 0.0);
    e.p90_abs = g.value("p90_abs_error", 0.0);
    e.bias = g.value("bias", 0.0);
    if (g.contains("tables") && g["tables"].is_array()) {
      for (const auto& t : g["tables"]) e.tables.push_back(t.get<std::string>());
    }
    if (e.runs > 0) return e;
  }
  return std::nullopt;
}

}  // namespace stratagem::tune
