#pragma once
// The training flags `stratagem worker` takes and `stratagem run` forwards to its workers,
// defined once so both commands accept and pass on exactly the same set.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/torch/worker_main.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {

struct WorkerFlags {
  runtime::WorkerArgs args;
  std::string seed;              ///< empty: the scenario's
  std::string kill_during_save;  ///< "STEP:RANK" (hidden, tests)
  std::string stall;             ///< "STEP:RANK" (hidden, tests)
};

inline void add_worker_flags(CLI::App& sub, WorkerFlags& f) {
  auto& a = f.args;
  sub.add_option("scenario", a.scenario, "Scenario file or shipped name")->required();
  sub.add_option("--steps", a.steps, "Training steps (default: the scenario's training.steps)");
  sub.add_flag("--cpu", a.cpu, "Run on the CPU with Gloo even when a GPU is present");
  sub.add_option("--mixed_precision", a.mixed_precision, "no | fp16 | bf16 (default: scenario)");
  sub.add_option("--data", a.data, "Byte-level text file to train on (default: synthetic task)");
  sub.add_option("--seed", f.seed, "Seed of initial weights and data (default: scenario)");
  sub.add_option("--lr", a.lr, "Learning rate (default 1e-3)");
  sub.add_option("--save_dir", a.save_dir, "Write checkpoints into this directory");
  sub.add_option("--save_every", a.save_every, "Checkpoint every K steps (default: at the end)");
  sub.add_option("--resume", a.resume, "Resume from the newest complete checkpoint in DIR");
  sub.add_option("--timeout", a.timeout_s,
                 "Seconds without progress before the job ends naming where each rank was "
                 "(default 300)");
  sub.add_option("--log_every", a.log_every, "Progress line every N steps (default 1)");
  sub.add_option("-o,--output", a.output, "Write the RunResult JSON (executor \"real\") here");
  sub.add_flag("--measure_units", a.measure_units,
               "Before training, time the model's units on every process and record them in "
               "the result's scenario (cluster.gpu.measured_units), as `calibrate --scenario` "
               "does");
  sub.add_option("--kill_during_save", f.kill_during_save, "Fault injection for tests: STEP:RANK")
      ->group("");
  sub.add_option("--stall", f.stall, "Fault injection for tests: STEP:RANK")->group("");
}

/// Checks and converts the string-valued flags into `f.args`.
inline void finish_worker_flags(WorkerFlags& f) {
  if (!f.seed.empty()) {
    try {
      f.args.seed = std::stoull(f.seed);
    } catch (const std::exception&) {
      throw SpecError("--seed", "expected a non-negative integer, got \"" + f.seed + "\"");
    }
  }
  auto step_rank = [](const std::string& flag, const std::string& v, std::int64_t& step,
                      int& rank) {
    if (v.empty()) return;
    const auto colon = v.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(v);
      step = std::stoll(v.substr(0, colon));
      rank = std::stoi(v.substr(colon + 1));
    } catch (const std::exception&) {
      throw SpecError(flag, "expected STEP:RANK, got \"" + v + "\"");
    }
  };
  step_rank("--kill_during_save", f.kill_during_save, f.args.kill_during_save_step,
            f.args.kill_during_save_rank);
  step_rank("--stall", f.stall, f.args.stall_at_step, f.args.stall_rank);
  if (f.args.steps < 0) throw SpecError("--steps", "must be >= 1");
  if (f.args.save_every < 0) throw SpecError("--save_every", "must be >= 0");
  if (f.args.timeout_s <= 0) throw SpecError("--timeout", "must be > 0 seconds");
  if (f.args.lr <= 0) throw SpecError("--lr", "must be > 0");
}

inline std::string exact(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

/// The flags as `stratagem worker` arguments (scenario first).
inline std::vector<std::string> worker_argv(const WorkerFlags& f) {
  const auto& a = f.args;
  std::vector<std::string> v = {a.scenario};
  auto opt = [&](const char* name, const std::string& value) {
    v.push_back(name);
    v.push_back(value);
  };
  if (a.steps > 0) opt("--steps", std::to_string(a.steps));
  if (a.cpu) v.push_back("--cpu");
  if (!a.mixed_precision.empty()) opt("--mixed_precision", a.mixed_precision);
  if (!a.data.empty()) opt("--data", a.data);
  if (!f.seed.empty()) opt("--seed", f.seed);
  opt("--lr", exact(a.lr));
  if (!a.save_dir.empty()) opt("--save_dir", a.save_dir);
  if (a.save_every > 0) opt("--save_every", std::to_string(a.save_every));
  if (!a.resume.empty()) opt("--resume", a.resume);
  opt("--timeout", exact(a.timeout_s));
  opt("--log_every", std::to_string(a.log_every));
  if (!a.output.empty()) opt("-o", a.output);
  if (a.measure_units) v.push_back("--measure_units");
  if (!f.kill_during_save.empty()) opt("--kill_during_save", f.kill_during_save);
  if (!f.stall.empty()) opt("--stall", f.stall);
  return v;
}

}  // namespace stratagem::cli
