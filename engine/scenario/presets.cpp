#include "engine/scenario/presets.hpp"

#include <algorithm>
#include <map>

#include "engine/scenario/embedded_files.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

namespace {

const char* file_of(PresetKind kind) {
  switch (kind) {
    case PresetKind::model:
      return "presets/models.json";
    case PresetKind::gpu:
      return "presets/gpus.json";
    case PresetKind::cluster:
      return "presets/clusters.json";
  }
  return "";
}

std::string_view embedded(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.content;
  }
  return {};
}

const nlohmann::json& table(PresetKind kind) {
  static const auto tables = [] {
    std::map<PresetKind, nlohmann::json> t;
    for (PresetKind k : {PresetKind::model, PresetKind::gpu, PresetKind::cluster}) {
      const std::string_view text = embedded(file_of(k));
      t[k] =
          text.empty() ? nlohmann::json::object() : parse_json_text(std::string(text), file_of(k));
    }
    return t;
  }();
  return tables.at(kind);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

const char* to_string(PresetKind kind) {
  switch (kind) {
    case PresetKind::model:
      return "model";
    case PresetKind::gpu:
      return "GPU";
    case PresetKind::cluster:
      return "cluster";
  }
  return "";
}

std::vector<std::string> preset_names(PresetKind kind) {
  std::vector<std::string> names;
  for (auto it = table(kind).begin(); it != table(kind).end(); ++it) names.push_back(it.key());
  return names;  // nlohmann's object is a std::map: already sorted
}

const nlohmann::json& preset(PresetKind kind, const std::string& name, const std::string& path) {
  const auto& t = table(kind);
  auto it = t.find(name);
  if (it == t.end()) {
    const auto names = preset_names(kind);
    std::string msg = std::string("unknown ") + to_string(kind) + " preset '" + name + "'";
    const std::string hint = closest(name, names);
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    throw SpecError(path, msg + "; valid: " + join(names));
  }
  return *it;
}

namespace {

void refuse_nulls(const nlohmann::json& patch, const std::string& path) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string at = path + "." + it.key();
    if (it->is_null()) {
      throw SpecError(at, "null is not a value here (leave the key out to keep the preset's)");
    }
    if (it->is_object()) refuse_nulls(*it, at);
  }
}

}  // namespace

nlohmann::json resolve_preset(PresetKind kind, const nlohmann::json& value,
                              const std::string& path) {
  if (value.is_string()) {
    nlohmann::json out = preset(kind, value.get<std::string>(), path);
    out["name"] = value.get<std::string>();
    return out;
  }
  if (!value.is_object()) {
    throw SpecError(path, std::string("expected a ") + to_string(kind) +
                              " preset name or an object, got " + value.type_name());
  }
  auto it = value.find("preset");
  if (it == value.end()) return value;
  if (!it->is_string()) throw SpecError(path + ".preset", "expected a string");
  nlohmann::json out = preset(kind, it->get<std::string>(), path + ".preset");
  out["name"] = it->get<std::string>();
  nlohmann::json patch = value;
  patch.erase("preset");
  // A JSON merge patch deletes the keys it sets to null: an override that is null (even under
  // a key that does not exist) would vanish without a word.
  refuse_nulls(patch, path);
  out.merge_patch(patch);
  return out;
}

std::vector<std::string> shipped_scenario_names() {
  std::vector<std::string> names;
  for (const auto& f : embedded_files()) {
    if (f.path.find('/') != std::string_view::npos) continue;  // presets/ and others
    std::string name(f.path);
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
      names.push_back(name.substr(0, name.size() - 5));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string shipped_scenario_text(const std::string& name) {
  const std::string_view text = embedded(name + ".json");
  if (text.empty()) {
    const auto names = shipped_scenario_names();
    std::string msg = "no such file or shipped scenario '" + name + "'";
    const std::string hint = closest(name, names);
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    throw SpecError(name, msg + "; shipped: " + join(names));
  }
  return std::string(text);
}

}  // namespace stratagem::scenario
