#pragma once
// Experiment trackers: what HuggingFace Accelerate's `init_trackers` / `log` / `end_training`
// write, as files a run keeps next to its checkpoints and any tool can read without us:
//
//   Trackers trackers(parse_trackers("all", "log_with"), "runs", "tiny-gpt", {{"lr", 3e-4}});
//   trackers.log({{"loss", 2.31}, {"eval", {{"loss", 2.40}}}}, step);  // "eval/loss"
//   trackers.close();                                                  // end_training
//
// jsonl: <project_dir>/<project_name>/metrics.jsonl, one JSON object a line; the first line a
// run writes is {"event":"init","project":…,"config":{…},"time":<unix seconds>}, then one
// {"step":s,<key>:<value>,…} per log() (no "step" when none was given). Non-finite numbers
// are null (JSON has no NaN).
// csv: <project_dir>/<project_name>/metrics.csv with the header "step,<keys>" fixed by the
// first log() (CSV cannot grow columns), one row per log(), RFC 4180 quoting; the config goes
// to config.json beside it. Non-finite numbers are nan, inf, -inf.
// Numbers are written as nlohmann's dump writes them, so a double reads back bit for bit.
//
// Both files are opened for appending: a resumed run continues its log (a second init line in
// metrics.jsonl; metrics.csv keeps the columns of the header it already has). Each record is
// flushed when logged, so a crashed run's metrics survive up to its last log().
// Errors: bad input is SpecError (parse_trackers: the field; the constructor:
// "init_trackers"; log(): "log"), checked before anything is written, so a rejected record
// reaches no file; a file that cannot be created or written is RuntimeError.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stratagem::accelerate {

enum class TrackerKind { jsonl, csv };

/// "jsonl" | "csv" | "all" (both) | a comma-separated list of them (spaces around items are
/// ignored, repeats count once) → the kinds, in the order named. Empty (or blank) → none.
/// Anything else is SpecError(field, …) naming the bad item.
std::vector<TrackerKind> parse_trackers(const std::string& text, const std::string& field);

/// The open trackers of one run (Accelerator::init_trackers … end_training).
class Trackers {
 public:
  /// Opens <project_dir>/<project_name>/metrics.jsonl and/or metrics.csv (creating the
  /// directories), appending when they exist. jsonl gets its init line with `config`; csv
  /// gets no config line: config.json is written (overwritten) beside it instead. A csv file
  /// that already has a header keeps its columns (its first must be "step", else SpecError).
  /// project_name must be a plain name (not empty, no '/', not "." or "..") →
  /// SpecError("init_trackers", …). No kinds: nothing is created and log() writes nothing.
  Trackers(std::vector<TrackerKind> kinds, const std::string& project_dir,
           const std::string& project_name, const nlohmann::json& config);

  /// Logs one record. `values` is a JSON object of numbers, strings and bools; nested objects
  /// are flattened with '/' as Accelerate's TensorBoard tracker does for dicts
  /// ({"eval":{"loss":1}} → "eval/loss"); keys come in the object's order (nlohmann::json
  /// sorts them). A top-level "step" key, a key that appears twice once flattened, or another
  /// value type (null, array) is SpecError("log", …). `step` >= 0, or -1 for none (no "step"
  /// in jsonl, an empty cell in csv). csv: the first log() of a new or empty file writes the
  /// header "step,<keys>"; a later key not in the header is SpecError("log", …); keys left
  /// out are empty cells.
  void log(const nlohmann::json& values, std::int64_t step = -1);

  /// end_training: flushes and closes the files. Calling it again does nothing; log() after
  /// it is SpecError("log", …).
  void close();

  /// The metrics files opened (metrics.jsonl, metrics.csv), in the order of the kinds given.
  const std::vector<std::string>& files() const { return files_; }

 private:
  std::vector<std::string> files_;
  std::ofstream jsonl_;
  std::ofstream csv_;
  std::string jsonl_path_;
  std::string csv_path_;
  std::vector<std::string> columns_;  ///< metrics.csv's columns after "step"
  bool csv_header_ = false;           ///< columns_ are fixed (written, or read on resume)
  bool closed_ = false;
};

}  // namespace stratagem::accelerate
