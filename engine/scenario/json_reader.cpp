#include "engine/scenario/json_reader.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

namespace {

std::string type_name(const nlohmann::json& j) {
  return j.type_name();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// The first byte of the JSON token whose last byte is at `end`: a string back to its opening
// quote, a number or literal back over its characters, punctuation is one byte.
std::size_t token_start(const std::string& text, std::size_t end) {
  if (end >= text.size()) return end;
  auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-';
  };
  if (text[end] == '"') {
    for (std::size_t i = end; i-- > 0;) {
      if (text[i] == '\n') break;  // strings do not span lines
      if (text[i] == '"') {
        std::size_t backslashes = 0;
        while (i > backslashes && text[i - 1 - backslashes] == '\\') ++backslashes;
        if (backslashes % 2 == 0) return i;
      }
    }
    return end;
  }
  std::size_t i = end;
  while (i > 0 && word(text[i]) && word(text[i - 1])) --i;
  return i;
}

}  // namespace

namespace {

std::string line_column(const std::string& text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// Before nlohmann parses (and later code walks the value recursively): nesting deeper than
// kMaxJsonDepth and numbers beyond a double's range are located errors, not a stack overflow
// or a library exception.
void check_structure(const std::string& text, const std::string& source) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw SpecError(
            source + ":" + line_column(text, i),
            "invalid JSON: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t end = i;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                   text[end] == '.' || text[end] == '+' || text[end] == '-')) {
        ++end;
      }
      const std::string token = text.substr(i, end - i);
      const double v = std::strtod(token.c_str(), nullptr);
      if (std::isinf(v)) {
        throw SpecError(source + ":" + line_column(text, i),
                        "number " + (token.size() > 40 ? token.substr(0, 40) + "…" : token) +
                            " is beyond the range of a double");
      }
      i = end - 1;
    }
  }
}

// The keys written twice in one object of `text`, a well-formed JSON document (parsed first).
// Keys are compared as written (escapes not decoded).
std::vector<DuplicateKey> find_duplicate_keys(const std::string& text) {
  struct Frame {
    bool object = false;
    std::string path;
    std::map<std::string, std::size_t> keys;  // key → offset of its first occurrence
    std::string last_key;
    int index = 0;  // arrays: the element being read
  };
  std::vector<DuplicateKey> out;
  std::vector<Frame> stack;
  auto child_path = [&]() {
    if (stack.empty()) return std::string();
    const Frame& f = stack.back();
    if (!f.object) return f.path + "[" + std::to_string(f.index) + "]";
    return f.path.empty() ? f.last_key : f.path + "." + f.last_key;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const std::size_t start = i++;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      const std::string s = text.substr(start + 1, i - start - 1);
      std::size_t j = i + 1;
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j < text.size() && text[j] == ':' && !stack.empty() && stack.back().object) {
        Frame& f = stack.back();
        const auto [it, fresh] = f.keys.emplace(s, start);
        if (!fresh) {
          out.push_back({f.path, s, line_column(text, start), line_column(text, it->second)});
        }
        f.last_key = s;
      }
    } else if (c == '{' || c == '[') {
      Frame f;
      f.object = c == '{';
      f.path = child_path();
      stack.push_back(std::move(f));
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && !stack.empty() && !stack.back().object) {
      ++stack.back().index;
    }
  }
  return out;
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& source,
                               std::vector<DuplicateKey>* duplicates) {
  check_structure(text, source);
  try {
    nlohmann::json parsed = nlohmann::json::parse(text);
    std::vector<DuplicateKey> found = find_duplicate_keys(text);
    if (duplicates) {
      *duplicates = std::move(found);
    } else if (!found.empty()) {
      const DuplicateKey& d = found.front();
      throw SpecError(source + ":" + d.at,
                      "key \"" + d.key + "\" written twice in " +
                          (d.path.empty() ? std::string("the top-level object") : d.path) +
                          " (first at " + d.first_at +
                          "); JSON keeps only the last one, so write it once");
    }
    return parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line L, column C:
    // reason"; the reason itself may hold ": " ("last read: '...'").
    const std::string what = e.what();
    const auto at = what.find(": ", what.find("column"));
    const std::string reason = at == std::string::npos ? what : what.substr(at + 2);
    // Translate the byte offset into line:column, counting from 1. nlohmann reports the last
    // byte it read, the end of the offending token; point at the token's start instead, where
    // the reader has to look (the string that stands where ':' should be, say).
    const std::size_t end = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    std::size_t start = token_start(text, end);
    // A misspelt literal ("tru}") is reported at the byte that broke it: back up over its
    // letters.
    if (reason.find("invalid literal") != std::string::npos) {
      while (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) --start;
    }
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < start; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw SpecError(source + ":" + std::to_string(line) + ":" + std::to_string(column),
                    "invalid JSON: " + reason);
  }
}

nlohmann::json read_json_file(const std::string& file, std::vector<DuplicateKey>* duplicates) {
  // Only regular files of a bounded size: a FIFO would block, /dev/zero never end.
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (!ec && std::filesystem::is_directory(status)) throw SpecError(file, "is a directory");
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw SpecError(file, "not a regular file (a FIFO, device or socket cannot be read as JSON)");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SpecError(file, "cannot open file");
  const auto size = std::filesystem::file_size(file, ec);
  if (!ec && size > kMaxJsonBytes) {
    throw SpecError(file, "is " + std::to_string(size >> 20) + " MiB; JSON inputs are limited to " +
                              std::to_string(kMaxJsonBytes >> 20) + " MiB");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_json_text(buffer.str(), file, duplicates);
}

std::string closest(const std::string& word, const std::vector<std::string>& choices) {
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& choice : choices) {
    const std::size_t d = edit_distance(word, choice);
    if (d < best_distance) {
      best_distance = d;
      best = choice;
    }
  }
  // Only suggest when the typo is small relative to the word.
  if (best.empty() || best_distance > std::max<std::size_t>(2, word.size() / 2)) return "";
  return best;
}

ObjectReader::ObjectReader(const nlohmann::json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw SpecError(path_.empty() ? "(top level)" : path_,
                    "expected an object, got " + type_name(object_));
  }
}

std::string ObjectReader::child_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

// A key set to null is neither a value nor absent: refusing it keeps `"tp": null` from
// silently meaning the default.
const nlohmann::json* ObjectReader::find(const std::string& key) {
  known_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end()) return nullptr;
  if (it->is_null()) {
    throw SpecError(child_path(key),
                    "null is not a value here (leave the key out for its default)");
  }
  return &*it;
}

bool ObjectReader::has(const std::string& key) {
  return find(key) != nullptr;
}

const nlohmann::json& ObjectReader::at(const std::string& key) {
  const nlohmann::json* value = find(key);
  if (!value) throw SpecError(child_path(key), "missing required key");
  return *value;
}

std::string ObjectReader::string(const std::string& key) {
  const auto& v = at(key);
  if (!v.is_string()) throw SpecError(child_path(key), "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

std::string ObjectReader::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

std::int64_t ObjectReader::integer(const std::string& key, std::int64_t min, std::int64_t max) {
  const auto& v = at(key);
  std::int64_t value = 0;
  if (v.is_number_integer()) {
    value = v.get<std::int64_t>();
  } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
             std::abs(v.get<double>()) < 9e18) {
    value = static_cast<std::int64_t>(v.get<double>());  // 1e9 written as a float is fine
  } else {
    throw SpecError(child_path(key),
                    "expected an integer, got " + (v.is_number() ? v.dump() : type_name(v)));
  }
  if (value < min || value > max) {
    throw SpecError(child_path(key), "must be in [" + std::to_string(min) + ", " +
                                         std::to_string(max) + "], got " + std::to_string(value));
  }
  return value;
}

std::int64_t ObjectReader::integer_or(const std::string& key, std::int64_t fallback,
                                      std::int64_t min, std::int64_t max) {
  return has(key) ? integer(key, min, max) : fallback;
}

double ObjectReader::number(const std::string& key, double min, double max) {
  const auto& v = at(key);
  if (!v.is_number()) throw SpecError(child_path(key), "expected a number, got " + type_name(v));
  const double value = v.get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    std::ostringstream msg;
    msg << "must be in [" << min << ", " << max << "], got " << value;
    throw SpecError(child_path(key), msg.str());
  }
  return value;
}

double ObjectReader::number_or(const std::string& key, double fallback, double min, double max) {
  return has(key) ? number(key, min, max) : fallback;
}

bool ObjectReader::boolean_or(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const auto& v = at(key);
  if (!v.is_boolean()) throw SpecError(child_path(key), "expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string ObjectReader::choice(const std::string& key, const std::vector<std::string>& choices) {
  const std::string value = string(key);
  for (const auto& c : choices) {
    if (c == value) return value;
  }
  std::string msg = "unknown value '" + value + "'";
  const std::string hint = closest(value, choices);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  throw SpecError(child_path(key), msg + "; valid: " + join(choices));
}

std::string ObjectReader::choice_or(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& choices) {
  return has(key) ? choice(key, choices) : fallback;
}

void ObjectReader::allow(std::initializer_list<const char*> keys) {
  for (const char* k : keys) known_.insert(k);
}

void ObjectReader::allow_text(std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    known_.insert(k);
    const nlohmann::json* v = find(k);
    if (v && !v->is_string()) {
      throw SpecError(child_path(k),
                      std::string("must be a string (free text), got ") + v->type_name());
    }
  }
}

void ObjectReader::finish() const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (known_.count(it.key())) continue;
    const std::vector<std::string> choices(known_.begin(), known_.end());
    std::string msg = "unknown key";
    const std::string hint = closest(it.key(), choices);
    if (!hint.empty())
      msg += " (did you mean '" + hint + "'?)";
    else
      msg += "; known keys: " + join(choices);
    throw SpecError(child_path(it.key()), msg);
  }
}

}  // namespace stratagem::scenario
