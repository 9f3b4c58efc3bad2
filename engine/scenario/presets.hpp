#pragma once
// Presets are data: scenarios/presets/{models,gpus,clusters}.json, compiled in by CMake.
// A scenario names one ("preset": "gpt2-xl") and may override any of its keys.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stratagem::scenario {

enum class PresetKind { model, gpu, cluster };
const char* to_string(PresetKind kind);

/// Names of the presets of a kind, sorted.
std::vector<std::string> preset_names(PresetKind kind);
/// The preset's JSON object; unknown names throw a SpecError listing the valid ones.
const nlohmann::json& preset(PresetKind kind, const std::string& name, const std::string& path);
/// A string names a preset; an object with "preset" is that preset with the object's other
/// keys laid over it (JSON merge patch); any other object is returned unchanged.
nlohmann::json resolve_preset(PresetKind kind, const nlohmann::json& value,
                              const std::string& path);

/// Shipped scenarios (scenarios/*.json), by file stem: "default", "ddp-gpt2-xl-8xa100", ...
std::vector<std::string> shipped_scenario_names();
/// The text of a shipped scenario; throws SpecError when unknown.
std::string shipped_scenario_text(const std::string& name);

}  // namespace stratagem::scenario
