// `stratagem validate --measured runs.jsonl [--json] [--by gpu|family|none]`: the simulator's
// predictions against measured training runs (sim/validation.hpp), in this executable (no
// LibTorch). Every other use of `validate` (real runs on this machine) is stratagem-runtime's.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/two_form_command.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "tune/ranking.hpp"
#include "tune/validation.hpp"

namespace stratagem::cli {
namespace {

std::string percent(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * e);
  return buf;
}

std::vector<std::string> summary_row(const std::string& label, const tune::ErrorSummary& s) {
  return {label,
          std::to_string(s.runs),
          fmt_percent(s.median_abs),
          fmt_percent(s.p90_abs),
          percent(s.signed_median),
          fmt_percent(s.within_10),
          fmt_percent(s.within_20),
          std::to_string(s.false_oom)};
}

nlohmann::json summary_json(const tune::ErrorSummary& s) {
  return {{"runs", s.runs},           {"median_abs_error", s.median_abs},
          {"p90_abs_error", s.p90_abs}, {"signed_median_error", s.signed_median},
          {"within_10", s.within_10}, {"within_20", s.within_20},
          {"false_oom", s.false_oom}};
}

int run_measured(const std::string& file, const std::string& profile, bool json, bool quiet) {
  auto runs = tune::load_measured_runs(file);
  if (!profile.empty()) {
    for (auto& r : runs) scenario::apply_profile_file(r.scenario, profile);
  }
  const bool tty = isatty(STDERR_FILENO) && !quiet;
  auto progress = [&](int done, int total) {
    if (!tty || (done % 8 != 0 && done != total)) return;
    const int width = 30, filled = width * done / std::max(total, 1);
    std::fprintf(stderr, "\r[%s%s] %d/%d runs", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  const auto rows = tune::compare_with_measured(runs, {}, progress);
  std::map<std::string, std::vector<tune::RunComparison>> by_gpu, by_family;
  for (const auto& r : rows) {
    by_gpu[r.gpu].push_back(r);
    by_family[r.family].push_back(r);
  }
  const tune::ErrorSummary all = tune::summarize(rows);
  const tune::Ranking ranking = tune::rank_pairs(runs, rows);
  if (json) {
    nlohmann::json out = {{"file", file}, {"summary", summary_json(all)}};
    auto order_json = [](const tune::PairOrder& o) {
      return nlohmann::json{{"pairs_differing_over_5_percent", o.pairs},
                            {"ordered_right", o.ordered_right},
                            {"ordered_right_share", o.share()},
                            {"all_pairs", o.all_pairs},
                            {"kendall_tau", o.kendall_tau()}};
    };
    out["ranking"] = order_json(ranking.overall);
    for (const auto& st : ranking.settings) {
      nlohmann::json j = order_json(st.order);
      j["setting"] = st.setting;
      j["runs"] = st.runs;
      out["ranking"]["settings"].push_back(std::move(j));
    }
    for (const auto& [g, v] : by_gpu) out["by_gpu"][g] = summary_json(tune::summarize(v));
    for (const auto& [f, v] : by_family) out["by_family"][f] = summary_json(tune::summarize(v));
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json j = {{"id", r.id},
                          {"gpu", r.gpu},
                          {"family", r.family},
                          {r.measured_is_step_time ? "measured_step_time_s"
                                                   : "measured_tokens_per_s_per_gpu",
                           r.measured},
                          {r.measured_is_step_time ? "predicted_step_time_s"
                                                   : "predicted_tokens_per_s_per_gpu",
                           r.predicted},
                          {"error", r.error()},
                          {"predicted_peak_memory_GiB", r.predicted_peak_GiB},
                          {"predicted_oom", r.predicted_oom}};
      if (r.measured_peak_GiB) j["measured_peak_memory_GiB"] = *r.measured_peak_GiB;
      list.push_back(std::move(j));
    }
    out["runs"] = std::move(list);
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table = {
      {"run", "gpu", "measured", "predicted", "error", "peak mem", "measured mem", "note"}};
  for (const auto& r : rows) {
    const auto value = [&](double v) {
      return r.measured_is_step_time ? fmt_time(v) : fmt_rate(v) + " tok/s";
    };
    char mem[32] = "-";
    if (r.measured_peak_GiB) std::snprintf(mem, sizeof mem, "%.2f GiB", *r.measured_peak_GiB);
    char peak[32];
    std::snprintf(peak, sizeof peak, "%.2f GiB", r.predicted_peak_GiB);
    table.push_back({r.id, r.gpu, value(r.measured), value(r.predicted), percent(r.error()), peak,
                     mem, r.predicted_oom ? "predicted OOM though it ran" : ""});
  }
  print_table(stdout, table);
  const tune::PairOrder& o = ranking.overall;
  std::printf("\n");
  if (o.all_pairs > 0) {
    std::printf(
        "order: %d settings (model, GPU, GPUs, sequence) with 2+ runs; of their %d pairs whose "
        "measured throughput differs by > 5 %%, %d ordered right (%.1f %%); Kendall's tau over "
        "all %d pairs %.2f\n",
        static_cast<int>(ranking.settings.size()), o.pairs, o.ordered_right, 100 * o.share(),
        o.all_pairs, o.kendall_tau());
  } else {
    std::printf("order: no setting (model, GPU, GPUs, sequence) has two runs to order\n");
  }
  std::printf(
      "error = predicted / measured throughput − 1 (positive: the simulator is "
      "optimistic)\n");
  std::vector<std::vector<std::string>> summary = {{"group", "runs", "median |err|", "p90 |err|",
                                                    "bias", "≤ 10%", "≤ 20%", "false OOM"}};
  summary.push_back(summary_row("all", all));
  for (const auto& [g, v] : by_gpu) summary.push_back(summary_row(g, tune::summarize(v)));
  for (const auto& [f, v] : by_family) summary.push_back(summary_row(f, tune::summarize(v)));
  print_table(stdout, summary);
  return 0;
}

Registration reg{
    {"validate", "Compare the simulator with measured runs (--measured), or run scenarios for real",
     57, [](CLI::App& sub) {
       return two_form_command(
           sub, "validate", "measured", "validate --measured runs.jsonl",
           [](const std::vector<std::string>& args) -> int {
             CLI::App app("validate --measured: the simulator against measured runs", "validate");
             std::string file, profile;
             bool json = false, quiet = false;
             app.add_option("--measured", file,
                            "JSON lines: {\"id\", \"scenario\", \"measured\": "
                            "{\"tokens_per_s_per_gpu\" | \"step_time_s\", \"peak_memory_GiB\"}}")
                 ->required();
             app.add_option("--profile", profile,
                            "Fitted profile (`calibrate --measured`) or hardware profile applied "
                            "to every run's scenario");
             app.add_flag("--json", json, "Print JSON");
             app.add_flag("--quiet", quiet, "No progress bar");
             if (!parse_local_form(app, args, "validate")) return 0;
             return run_measured(file, profile, json, quiet);
           });
     }}};

}  // namespace
}  // namespace stratagem::cli
