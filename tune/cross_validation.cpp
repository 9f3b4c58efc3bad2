#include "tune/cross_validation.hpp"

#include <algorithm>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "tune/parallel.hpp"

namespace stratagem::tune {

std::vector<RunComparison> predict_with_fit(const std::vector<MeasuredRun>& runs,
                                            const scenario::FittedProfile& fit, int threads) {
  std::vector<RunComparison> out(runs.size());
  parallel_for(runs.size(), threads, [&](std::size_t i) {
    scenario::Scenario s = runs[i].scenario;
    if (const scenario::GpuFit* g = fit.find(s.cluster.gpu.name)) {
      scenario::apply_fit_values(s, g->values());
    }
    out[i] = predict_measured(runs[i], s, plan::build_plan(runs[i].scenario));
  });
  return out;
}

CrossValidation leave_one_source_out(const std::vector<MeasuredRun>& runs,
                                     const MeasuredFitOptions& options) {
  std::vector<std::string> sources;
  for (const auto& r : runs) {
    if (std::find(sources.begin(), sources.end(), r.source) == sources.end()) {
      sources.push_back(r.source);
    }
  }
  if (sources.size() < 2) {
    throw SpecError("--measured",
                    "leave-one-source-out cross-validation needs runs from at least two tables "
                    "(files); got " +
                        std::to_string(sources.size()));
  }
  CrossValidation cv;
  for (const auto& held : sources) {
    std::vector<MeasuredRun> train, test;
    for (const auto& r : runs) (r.source == held ? test : train).push_back(r);
    scenario::FittedProfile fit = fit_measured_runs(train, options);
    if (options.per_chip) {
      // A held-out GPU of a chip the other tables measured takes that chip's fit.
      for (const MeasuredRun& r : test) {
        const scenario::GpuSpec& gpu = r.scenario.cluster.gpu;
        if (fit.find(gpu.name)) continue;
        for (const auto& t : train) {
          if (chip_of(t.scenario.cluster.gpu) != chip_of(gpu)) continue;
          if (const scenario::GpuFit* g = fit.find(t.scenario.cluster.gpu.name)) {
            scenario::GpuFit copy = *g;
            copy.gpu = gpu.name;
            fit.gpus.push_back(copy);
            break;
          }
        }
      }
    }
    SourceFold fold;
    fold.source = held;
    fold.runs = static_cast<int>(test.size());
    for (const MeasuredRun& r : test) {
      const std::string& gpu = r.scenario.cluster.gpu.name;
      const scenario::GpuFit* g = fit.find(gpu);
      bool any = false;
      if (g) {
        for (const auto& p : g->parameters) any = any || p.determined;
      }
      if (any && std::find(fold.fitted_gpus.begin(), fold.fitted_gpus.end(), gpu) ==
                     fold.fitted_gpus.end()) {
        fold.fitted_gpus.push_back(gpu);
      }
    }
    fold.unfitted_rows = predict_with_fit(test, scenario::FittedProfile{}, options.threads);
    fold.held_out_rows = predict_with_fit(test, fit, options.threads);
    fold.unfitted = summarize(fold.unfitted_rows);
    fold.held_out = summarize(fold.held_out_rows);
    fold.unfitted_order = rank_pairs(test, fold.unfitted_rows).overall;
    fold.held_out_order = rank_pairs(test, fold.held_out_rows).overall;
    fold.fit = std::move(fit);
    cv.folds.push_back(std::move(fold));
  }
  return cv;
}

}  // namespace stratagem::tune
