// `stratagem calibrate --measured runs.jsonl -o fitted.json`: fits the fitted profile's
// hardware multipliers to measured training runs, per GPU (sim/measured_fit.hpp), in this
// executable (no LibTorch). Every other use of `calibrate` (measuring this machine) is
// stratagem-runtime's.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <optional>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/two_form_command.hpp"
#include "engine/scenario/error.hpp"
#include "tune/cross_validation.hpp"
#include "tune/measured_fit.hpp"

namespace stratagem::cli {
namespace {

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

std::string order_text(const tune::PairOrder& o) {
  if (o.pairs == 0) return "no pairs";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d/%d (%.0f%%)", o.ordered_right, o.pairs, 100.0 * o.share());
  return buf;
}

nlohmann::json summary_json(const tune::ErrorSummary& e, const tune::PairOrder& o) {
  return {{"median_abs_error", e.median_abs},
          {"p90_abs_error", e.p90_abs},
          {"bias", e.signed_median},
          {"pairs", o.pairs},
          {"pairs_ordered_right", o.ordered_right},
          {"kendall_tau", o.kendall_tau()}};
}

nlohmann::json cross_validation_json(const tune::CrossValidation& cv) {
  nlohmann::json folds = nlohmann::json::array();
  for (const auto& f : cv.folds) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < f.held_out_rows.size(); ++i) {
      const auto& r = f.held_out_rows[i];
      rows.push_back({{"id", r.id},
                      {"gpu", r.gpu},
                      {"stack", r.stack},
                      {"error", r.error()},
                      {"unfitted_error", f.unfitted_rows[i].error()}});
    }
    folds.push_back({{"source", f.source},
                     {"runs", f.runs},
                     {"fitted_gpus", f.fitted_gpus},
                     {"unfitted", summary_json(f.unfitted, f.unfitted_order)},
                     {"held_out", summary_json(f.held_out, f.held_out_order)},
                     {"fit", scenario::to_json(f.fit)["gpus"]},
                     {"held_out_rows", rows}});
  }
  return folds;
}

void print_cross_validation(const tune::CrossValidation& cv) {
  std::printf(
      "\nleave-one-source-out: each table predicted by the fit to the other tables "
      "(\"as shipped\": the presets unfitted)\n");
  std::vector<std::vector<std::string>> t = {{"held-out table", "runs", "fitted GPUs",
                                              "median |err|", "p90 |err|", "bias", "order",
                                              "as shipped: median", "p90", "bias", "order"}};
  for (const auto& f : cv.folds) {
    std::string gpus;
    for (const auto& g : f.fitted_gpus) gpus += (gpus.empty() ? "" : " ") + g;
    t.push_back({f.source, std::to_string(f.runs), gpus.empty() ? "none" : gpus,
                 fmt_percent(f.held_out.median_abs), fmt_percent(f.held_out.p90_abs),
                 signed_percent(f.held_out.signed_median), order_text(f.held_out_order),
                 fmt_percent(f.unfitted.median_abs), fmt_percent(f.unfitted.p90_abs),
                 signed_percent(f.unfitted.signed_median), order_text(f.unfitted_order)});
  }
  print_table(stdout, t);
}

int run_fit(const std::vector<std::string>& files, const std::string& out, const std::string& name,
            int threads, const std::vector<std::string>& parameter_names, bool per_chip,
            double min_sensitivity, bool cross_validate, bool json, bool quiet) {
  std::vector<tune::MeasuredRun> runs;
  std::string file;
  for (const auto& f : files) {
    auto more = tune::load_measured_runs(f);
    runs.insert(runs.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
    file += (file.empty() ? "" : ", ") + f;
  }
  const bool tty = isatty(STDERR_FILENO) && !quiet && !json;
  tune::MeasuredFitOptions options;
  options.threads = threads;
  options.per_chip = per_chip;
  options.min_sensitivity = min_sensitivity;
  for (const auto& n : parameter_names) {
    const auto p = scenario::parse_fit_param(n);
    if (!p) {
      throw SpecError("--parameters", "unknown parameter '" + n +
                                          "' (gemm, fp8_gemm, attention, hbm, intra_link, "
                                          "inter_link, comm_compute_slowdown)");
    }
    options.parameters.push_back(*p);
  }
  auto last = std::chrono::steady_clock::now();
  std::string stage;
  options.progress = [&](long done, long expected) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty || (done < expected && now - last < std::chrono::milliseconds(200))) return;
    last = now;
    const int width = 30;
    const int filled = static_cast<int>(width * std::min(1.0, double(done) / double(expected)));
    std::fprintf(stderr, "\r%s[%s%s] %ld simulations", stage.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done);
    if (done >= expected) std::fprintf(stderr, "\n");
  };
  std::optional<tune::CrossValidation> cv;
  if (cross_validate) {
    stage = "leave-one-source-out ";
    cv = tune::leave_one_source_out(runs, options);
    stage = "";
  }
  scenario::FittedProfile profile = tune::fit_measured_runs(runs, options);
  profile.name = name.empty() ? "fitted to " + file : name;
  profile.measured = file;
  profile.date = utc_now();
  const nlohmann::json cv_json = cv ? cross_validation_json(*cv) : nlohmann::json(nullptr);
  scenario::save_fitted_profile(profile, out, cv_json);
  if (json) {
    nlohmann::json doc = scenario::to_json(profile);
    if (cv) doc["cross_validation"] = cv_json;
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::printf("fitted to %zu runs of %s; wrote %s\n\n", runs.size(), file.c_str(), out.c_str());
  std::vector<std::vector<std::string>> table = {{"gpu", "runs", "parameter", "value ± 1σ"}};
  for (const auto& g : profile.gpus) {
    bool first = true;
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      const auto fp = static_cast<scenario::FitParam>(p);
      if (!options.fits(fp)) continue;
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
  if (cv) print_cross_validation(*cv);
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
             std::vector<std::string> files, parameters;
             std::string out, name;
             int threads = 0;
             double min_sensitivity = 0;
             bool json = false, quiet = false, cross_validate = false, per_chip = false;
             app.add_option("--measured", files,
                            "JSON lines as `validate --measured` reads: {\"id\", \"scenario\", "
                            "\"measured\": {\"tokens_per_s_per_gpu\" | \"step_time_s\"}}; "
                            "several files (tables) are fitted together")
                 ->required();
             app.add_option("--parameters", parameters,
                            "Fit only these (gemm, fp8_gemm, attention, hbm, intra_link, "
                            "inter_link, comm_compute_slowdown; default: all)")
                 ->delimiter(',');
             app.add_option("--min-sensitivity", min_sensitivity,
                            "A parameter is determined only when some run's log throughput moves "
                            "by at least this times its log (default 0)")
                 ->check(cli::number_in(0.0, 10.0));
             app.add_flag("--per-chip", per_chip,
                          "Fit GPUs of one chip together (same SM count and tensor-core "
                          "peaks, e.g. A100 SXM 40 GB and 80 GB)");
             app.add_flag("--cross-validate", cross_validate,
                          "Also predict each file (table) by the fit to the others and print "
                          "their held-out error and pairwise order (leave one source out)");
             app.add_option("-o,--out", out, "Fitted profile to write (JSON)")->required();
             app.add_option("--name", name, "Profile name (default: fitted to <file>)");
             app.add_option("--threads", threads,
                            "Simulations at once (default: one per hardware thread)")
                 ->check(CLI::NonNegativeNumber);
             app.add_flag("--json", json, "Print the profile as JSON");
             app.add_flag("--quiet", quiet, "No progress bar");
             if (!parse_local_form(app, args, "calibrate")) return 0;
             return run_fit(files, out, name, threads, parameters, per_chip, min_sensitivity,
                            cross_validate, json, quiet);
           });
     }}};

}  // namespace
}  // namespace stratagem::cli
