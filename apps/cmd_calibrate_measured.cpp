// `stratagem calibrate --measured runs.jsonl -o fitted.json`: fits the fitted profile's
// hardware multipliers to measured training runs, per GPU (sim/measured_fit.hpp), in this
// executable (no LibTorch). Every other use of `calibrate` (measuring this machine) is
// stratagem-runtime's.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/two_form_command.hpp"
#include "engine/scenario/error.hpp"
#include "tune/measured_fit.hpp"

namespace stratagem::cli {
namespace {

std::string signed_percent(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * e);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string value_text(scenario::FitParam p, const scenario::FittedValue& v) {
  char buf[64];
  if (!v.determined) return scenario::is_scale(p) ? "1 (not determined)" : "0 (not determined)";
  if (scenario::is_scale(p)) {
    std::snprintf(buf, sizeof buf, "%.3f ± %.1f%%", v.value, 100.0 * v.stderr_);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f ± %.3f", v.value, v.stderr_);
  }
  return buf;
}

int run_fit(const std::string& file, const std::string& out, const std::string& name, int threads,
            bool json, bool quiet) {
  const auto runs = tune::load_measured_runs(file);
  const bool tty = isatty(STDERR_FILENO) && !quiet && !json;
  tune::MeasuredFitOptions options;
  options.threads = threads;
  auto last = std::chrono::steady_clock::now();
  options.progress = [&](long done, long expected) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty || (done < expected && now - last < std::chrono::milliseconds(200))) return;
    last = now;
    const int width = 30;
    const int filled = static_cast<int>(width * std::min(1.0, double(done) / double(expected)));
    std::fprintf(stderr, "\r[%s%s] %ld simulations", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done);
    if (done >= expected) std::fprintf(stderr, "\n");
  };
  scenario::FittedProfile profile = tune::fit_measured_runs(runs, options);
  profile.name = name.empty() ? "fitted to " + file : name;
  profile.measured = file;
  profile.date = utc_now();
  scenario::save_fitted_profile(profile, out);
  if (json) {
    std::cout << scenario::to_json(profile).dump(2) << "\n";
    return 0;
  }
  std::printf("fitted to %zu runs of %s; wrote %s\n\n", runs.size(), file.c_str(), out.c_str());
  std::vector<std::vector<std::string>> table = {{"gpu", "runs", "parameter", "value ± 1σ"}};
  for (const auto& g : profile.gpus) {
    bool first = true;
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      const auto fp = static_cast<scenario::FitParam>(p);
      table.push_back({first ? g.gpu : "", first ? std::to_string(g.runs) : "",
                       scenario::to_string(fp), value_text(fp, g.parameters[p])});
      first = false;
    }
  }
  print_table(stdout, table);
  std::printf("\n");
  std::vector<std::vector<std::string>> errors = {
      {"gpu", "median |err| before", "after", "leave-one-out", "bias before", "after"}};
  for (const auto& g : profile.gpus) {
    errors.push_back({g.gpu, fmt_percent(g.median_abs_error_before),
                      fmt_percent(g.median_abs_error_after), fmt_percent(g.median_abs_error_loo),
                      signed_percent(g.bias_before), signed_percent(g.bias_after)});
  }
  print_table(stdout, errors);
  std::printf("\nuse it with: stratagem sim|compare|search ... --profile %s, or "
              "stratagem validate --measured runs.jsonl --profile %s\n",
              out.c_str(), out.c_str());
  return 0;
}

Registration reg{
    {"calibrate", "Measure this machine, or fit to measured runs (--measured), for --profile", 53,
     [](CLI::App& sub) {
       return two_form_command(
           sub, "calibrate", "measured", "calibrate --measured runs.jsonl -o fitted.json",
           [](const std::vector<std::string>& args) -> int {
             CLI::App app("calibrate --measured: fit the simulator's hardware multipliers (GEMM, "
                          "attention, HBM, links, communication/compute slow-down) to measured "
                          "runs, per GPU",
                          "calibrate");
             std::string file, out, name;
             int threads = 0;
             bool json = false, quiet = false;
             app.add_option("--measured", file,
                            "JSON lines as `validate --measured` reads: {\"id\", \"scenario\", "
                            "\"measured\": {\"tokens_per_s_per_gpu\" | \"step_time_s\"}}")
                 ->required();
             app.add_option("-o,--out", out, "Fitted profile to write (JSON)")->required();
             app.add_option("--name", name, "Profile name (default: fitted to <file>)");
             app.add_option("--threads", threads,
                            "Simulations at once (default: one per hardware thread)")
                 ->check(CLI::NonNegativeNumber);
             app.add_flag("--json", json, "Print the profile as JSON");
             app.add_flag("--quiet", quiet, "No progress bar");
             if (!parse_local_form(app, args, "calibrate")) return 0;
             return run_fit(file, out, name, threads, json, quiet);
           });
     }}};

}  // namespace
}  // namespace stratagem::cli
