#include "engine/accelerate/trackers.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Record = std::vector<std::pair<std::string, json>>;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::string quote(const std::string& s) { return "\"" + s + "\""; }

// JSON text on one line; bytes that are not UTF-8 become U+FFFD instead of throwing.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// RFC 4180: a cell with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_cell(const json& v) {
  if (v.is_string()) return csv_text(v.get_ref<const std::string&>());
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  }
  return v.dump();  // numbers as in jsonl (a double round-trips), bools as true / false
}

// The first record of an RFC 4180 file (its header), cells unquoted.
std::vector<std::string> read_csv_header(std::istream& in) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  char c = 0;
  while (in.get(c)) {
    if (quoted) {
      if (c != '"') {
        cells.back() += c;
      } else if (in.peek() == '"') {
        in.get();
        cells.back() += '"';
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

void flatten(const json& object, const std::string& prefix, Record& out,
             std::set<std::string>& seen) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "/" + it.key();
    const json& v = it.value();
    if (v.is_object()) {
      flatten(v, key, out, seen);
      continue;
    }
    if (!v.is_number() && !v.is_string() && !v.is_boolean()) {
      throw SpecError("log", "value of " + quote(key) + " is " + std::string(v.type_name()) +
                                 "; a record holds numbers, strings and bools (nested objects "
                                 "are flattened with '/')");
    }
    if (key == "step") {
      throw SpecError("log", "key \"step\" is reserved for the step argument of log()");
    }
    if (!seen.insert(key).second) {
      throw SpecError("log", "key " + quote(key) + " appears twice once nested objects are "
                                                   "flattened with '/'");
    }
    out.emplace_back(key, v);
  }
}

// Opens `path` for appending; a last line cut short (a crash mid-write) is ended first, so
// the next record starts on its own line.
void open_append(std::ofstream& out, const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  bool cut = false;
  if (!ec && size > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(-1, std::ios::end);
    char last = '\n';
    cut = in.get(last) && last != '\n';
  }
  out.open(path, std::ios::binary | std::ios::app);
  if (!out.is_open()) {
    throw RuntimeError("init_trackers: cannot open " + path + ": " + std::strerror(errno));
  }
  if (cut) out << '\n';
}

void write_line(std::ofstream& out, const std::string& path, const std::string& line) {
  out << line << '\n';
  out.flush();
  if (!out) throw RuntimeError("log: cannot write " + path);
}

}  // namespace

std::vector<TrackerKind> parse_trackers(const std::string& text, const std::string& field) {
  std::vector<TrackerKind> kinds;
  const auto add = [&](TrackerKind k) {
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  };
  if (trim(text).empty()) return kinds;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const std::string item =
        trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item == "jsonl") {
      add(TrackerKind::jsonl);
    } else if (item == "csv") {
      add(TrackerKind::csv);
    } else if (item == "all") {
      add(TrackerKind::jsonl);
      add(TrackerKind::csv);
    } else {
      throw SpecError(field, "unknown tracker " + quote(item) + " in " + quote(text) +
                                 " (expected jsonl, csv, all or a comma-separated list)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return kinds;
}

Trackers::Trackers(std::vector<TrackerKind> kinds, const std::string& project_dir,
                   const std::string& project_name, const nlohmann::json& config) {
  if (project_name.empty() || project_name == "." || project_name == ".." ||
      project_name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    throw SpecError("init_trackers", "project name " + quote(project_name) +
                                         " must be a plain directory name (not empty, no '/', "
                                         "not \".\" or \"..\")");
  }
  const auto wants = [&](TrackerKind k) {
    return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  };
  if (kinds.empty()) return;
  const fs::path dir = fs::path(project_dir) / project_name;
  jsonl_path_ = (dir / "metrics.jsonl").string();
  csv_path_ = (dir / "metrics.csv").string();
  // A resumed csv keeps its columns; read (and check) them before anything is written.
  if (wants(TrackerKind::csv)) {
    std::ifstream existing(csv_path_, std::ios::binary);
    if (existing && existing.peek() != std::char_traits<char>::eof()) {
      const std::vector<std::string> header = read_csv_header(existing);
      if (header.front() != "step") {
        throw SpecError("init_trackers", csv_path_ + " does not start with a \"step\" column, "
                                         "so these trackers did not write it; move it or pick "
                                         "another project name");
      }
      columns_.assign(header.begin() + 1, header.end());
      csv_header_ = true;
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("init_trackers: cannot create " + dir.string() + ": " + ec.message());

  for (const TrackerKind kind : kinds) {
    if (kind == TrackerKind::jsonl && !jsonl_.is_open()) {
      open_append(jsonl_, jsonl_path_);
      const double now = std::chrono::duration<double>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
      write_line(jsonl_, jsonl_path_,
                 "{\"event\":\"init\",\"project\":" + dump(project_name) +
                     ",\"config\":" + dump(config) + ",\"time\":" + dump(now) + "}");
      files_.push_back(jsonl_path_);
    } else if (kind == TrackerKind::csv && !csv_.is_open()) {
      open_append(csv_, csv_path_);
      const std::string config_path = (dir / "config.json").string();
      std::ofstream config_out(config_path, std::ios::binary | std::ios::trunc);
      config_out << config.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
      config_out.flush();
      if (!config_out) throw RuntimeError("init_trackers: cannot write " + config_path);
      files_.push_back(csv_path_);
    }
  }
}

void Trackers::log(const nlohmann::json& values, std::int64_t step) {
  if (closed_) throw SpecError("log", "log() called after end_training (close())");
  if (!values.is_object()) {
    throw SpecError("log", "values must be a JSON object of numbers, strings and bools, got " +
                               std::string(values.type_name()));
  }
  if (step < -1) {
    throw SpecError("log", "step must be >= 0, or -1 for none, got " + std::to_string(step));
  }
  Record record;
  std::set<std::string> seen;
  flatten(values, "", record, seen);

  // Every check comes before the first write: a rejected record reaches no file.
  std::vector<std::string> columns = columns_;
  if (!csv_header_) {
    for (const auto& [key, value] : record) columns.push_back(key);
  }
  std::string header = "step";
  for (const auto& c : columns) header += "," + csv_text(c);
  std::vector<std::string> cells(columns.size());
  if (csv_.is_open()) {
    for (const auto& [key, value] : record) {
      const auto at = std::find(columns.begin(), columns.end(), key);
      if (at == columns.end()) {
        throw SpecError("log", "key " + quote(key) + " is not a column: CSV columns are fixed " +
                                   "by the first log call (or by the header of the file a " +
                                   "resumed run appends to); " + csv_path_ + " has " + header);
      }
      cells[at - columns.begin()] = csv_cell(value);
    }
  }

  if (jsonl_.is_open()) {
    std::string line = "{";
    if (step >= 0) line += "\"step\":" + std::to_string(step);
    for (const auto& [key, value] : record) {
      if (line.size() > 1) line += ",";
      line += dump(key) + ":" + dump(value);
    }
    write_line(jsonl_, jsonl_path_, line + "}");
  }
  if (csv_.is_open()) {
    if (!csv_header_) {
      write_line(csv_, csv_path_, header);
      columns_ = columns;
      csv_header_ = true;
    }
    std::string row = step >= 0 ? std::to_string(step) : "";
    for (const auto& cell : cells) row += "," + cell;
    write_line(csv_, csv_path_, row);
  }
}

void Trackers::close() {
  closed_ = true;
  if (jsonl_.is_open()) jsonl_.close();  // close() flushes
  if (csv_.is_open()) csv_.close();
}

}  // namespace stratagem::accelerate
