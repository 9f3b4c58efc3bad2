#pragma once
// Reads one JSON object with a path for error messages, typed getters with ranges, and a
// finish() that rejects keys nobody asked for (suggesting the closest known key).
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stratagem::scenario {

/// Limits on JSON inputs (scenarios, profiles, DeepSpeed configs): nesting depth and file size.
inline constexpr int kMaxJsonDepth = 256;
inline constexpr std::uintmax_t kMaxJsonBytes = std::uintmax_t{64} << 20;

/// A key written twice in one JSON object: the object's path ("strategy"; "" at the top), the
/// key, and where the later and the first one stand ("line:column").
struct DuplicateKey {
  std::string path, key, at, first_at;
};
/// Parses JSON text; a syntax error, nesting deeper than kMaxJsonDepth or a number beyond a
/// double's range becomes a SpecError "<source>:<line>:<col>: ...". A key written twice in
/// one object (which JSON parsers resolve silently, the last one winning) is a SpecError at
/// the second, unless `duplicates` is given: then they are listed there and the last counts.
nlohmann::json parse_json_text(const std::string& text, const std::string& source,
                               std::vector<DuplicateKey>* duplicates = nullptr);
/// Reads and parses a JSON file; a missing file, a directory, a FIFO or device, or a file
/// larger than kMaxJsonBytes is a SpecError naming it. `duplicates` as parse_json_text's.
nlohmann::json read_json_file(const std::string& file,
                              std::vector<DuplicateKey>* duplicates = nullptr);
/// "Did you mean" text for `word` among `choices` ("" when nothing is close).
std::string closest(const std::string& word, const std::vector<std::string>& choices);

class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& object, std::string path);

  bool has(const std::string& key);
  const nlohmann::json* find(const std::string& key);
  /// `has` and `find`: whether `key` is there / its value (nullptr when absent); a key set to
  /// null is a SpecError naming it. `at`: the value; SpecError "missing required key" when absent.
  const nlohmann::json& at(const std::string& key);
  std::string child_path(const std::string& key) const;
  const std::string& path() const { return path_; }

  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max);
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t min,
                          std::int64_t max);
  double number(const std::string& key, double min, double max);
  double number_or(const std::string& key, double fallback, double min, double max);
  bool boolean_or(const std::string& key, bool fallback);
  /// One of `choices` (case-sensitive); otherwise an error listing them.
  std::string choice(const std::string& key, const std::vector<std::string>& choices);
  std::string choice_or(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& choices);

  /// Marks keys as known without reading them (read elsewhere).
  void allow(std::initializer_list<const char*> keys);
  /// Marks free-text keys (description, source) as known; one present must be a string.
  void allow_text(std::initializer_list<const char*> keys);
  /// Throws on the first key that was never asked for or allowed.
  void finish() const;

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::set<std::string> known_;
};

}  // namespace stratagem::scenario
