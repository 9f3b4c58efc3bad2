#include "tune/measured_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "tune/parallel.hpp"

namespace stratagem::tune {

namespace {

using scenario::FitParam;
using scenario::FitValues;
using Matrix = std::vector<std::vector<double>>;

constexpr double kStep = 0.02;         // finite-difference step (log scale or absolute)
constexpr double kMinLogScale = -3.0;  // scales kept within e^±3 (0.05 … 20)
constexpr double kMaxLogScale = 3.0;
constexpr double kMaxSlowdown = 2.0;
constexpr double kUndetermined = 1e-4;  // rms sensitivity below this: no run depends on it
constexpr double kSeparable = 0.1;      // see separable()

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// The parameters among `kept` (columns of `j` by their place in `active`, `norms` their rms
/// sensitivities) that the runs can tell apart: a parameter whose effect on the runs is (nearly)
/// a combination of stronger ones' keeps less than kSeparable of its column's length once the
/// stronger columns are projected out (Gram–Schmidt, strongest first). Sorted by parameter.
std::vector<int> separable(const Matrix& j, const std::vector<int>& active,
                           const std::vector<int>& kept, const std::vector<double>& norms) {
  const std::size_t n = j.size();
  std::vector<std::size_t> by_norm(kept.size());
  for (std::size_t c = 0; c < kept.size(); ++c) by_norm[c] = c;
  std::sort(by_norm.begin(), by_norm.end(),
            [&](std::size_t a, std::size_t b) { return norms[a] > norms[b]; });
  std::vector<std::vector<double>> basis;
  std::vector<int> out;
  for (std::size_t c : by_norm) {
    const auto col =
        static_cast<std::size_t>(std::find(active.begin(), active.end(), kept[c]) - active.begin());
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = j[i][col];
    const double length = std::sqrt(dot(v, v));
    for (const auto& e : basis) {
      const double d = dot(v, e);
      for (std::size_t i = 0; i < n; ++i) v[i] -= d * e[i];
    }
    const double rest = std::sqrt(dot(v, v));
    if (rest < kSeparable * length) continue;
    for (double& x : v) x /= rest;
    basis.push_back(std::move(v));
    out.push_back(kept[c]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Solves A·x = b by Gaussian elimination with partial pivoting; false when singular.
bool solve(Matrix a, std::vector<double> b, std::vector<double>& x) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0.0);
  for (std::size_t c = n; c-- > 0;) {
    double v = b[c];
    for (std::size_t k = c + 1; k < n; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return true;
}

bool invert(const Matrix& a, Matrix& inv) {
  const std::size_t n = a.size();
  inv.assign(n, std::vector<double>(n, 0.0));
  for (std::size_t c = 0; c < n; ++c) {
    std::vector<double> e(n, 0.0), x;
    e[c] = 1.0;
    if (!solve(a, e, x)) return false;
    for (std::size_t r = 0; r < n; ++r) inv[r][c] = x[r];
  }
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double median_abs_error(const std::vector<double>& log_residuals) {
  std::vector<double> e;
  for (double r : log_residuals) e.push_back(std::abs(std::expm1(r)));
  return median(e);
}

double bias(const std::vector<double>& log_residuals) {
  std::vector<double> e;
  for (double r : log_residuals) e.push_back(std::expm1(r));
  return median(e);
}

/// The runs of one GPU with their plans built once (the fitted values change costs only).
class GroupFit {
 public:
  GroupFit(std::vector<const MeasuredRun*> runs, const MeasuredFitOptions& o)
      : runs_(std::move(runs)), options_(o) {
    // A GEMM efficiency cannot exceed the peak: its scale stops where the curve's maximum
    // reaches 1.
    upper_.assign(scenario::kFitParamCount, kMaxLogScale);
    const scenario::GpuSpec& gpu = runs_.front()->scenario.cluster.gpu;
    const auto cap = [&](FitParam p, scenario::DType d) {
      const double top = gpu.efficiency(d).at(1e9);
      if (top > 0) upper_[static_cast<int>(p)] = std::min(kMaxLogScale, -std::log(top));
    };
    cap(FitParam::gemm, scenario::DType::bf16);
    if (gpu.peak_fp8 > 0) cap(FitParam::gemm_fp8, scenario::DType::fp8);
    plans_.reserve(runs_.size());
    for (const MeasuredRun* r : runs_) plans_.push_back(plan::build_plan(r->scenario));
  }

  scenario::GpuFit fit(long& done, long& expected) {
    done_ = &done;
    expected_ = &expected;
    const std::size_t n = runs_.size();
    std::vector<int> active;
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      if (options_.fits(static_cast<FitParam>(p))) active.push_back(p);
    }
    std::vector<double> theta(scenario::kFitParamCount, 0.0);  // neutral: log 1 = 0, slow-down 0
    std::vector<double> r0 = residuals(theta);
    const std::vector<double> before = r0;
    // Sensitivities at the start decide which parameters the runs determine at all.
    Matrix j = jacobian(theta, r0, active);
    std::vector<int> kept;
    std::vector<double> norms;
    for (std::size_t c = 0; c < active.size(); ++c) {
      double s = 0, strongest = 0;
      for (std::size_t i = 0; i < n; ++i) {
        s += j[i][c] * j[i][c];
        strongest = std::max(strongest, std::abs(j[i][c]));
      }
      const double rms = std::sqrt(s / static_cast<double>(n));
      if (rms >= kUndetermined && strongest >= options_.min_sensitivity) {
        kept.push_back(active[c]);
        norms.push_back(rms);
      }
    }
    // No more parameters than runs − 1 (the least influential go first).
    while (!kept.empty() && kept.size() + 1 > n) {
      const auto weakest = std::min_element(norms.begin(), norms.end()) - norms.begin();
      kept.erase(kept.begin() + weakest);
      norms.erase(norms.begin() + weakest);
    }
    kept = separable(j, active, kept, norms);
    active = kept;
    std::vector<double> r = r0;
    double cost = sum_sq(r);
    double lambda = 1e-3;
    if (!active.empty()) {
      j = jacobian(theta, r, active);
      for (int it = 0; it < options_.max_iterations; ++it) {
        const Matrix a = normal(j);
        const std::vector<double> g = gradient(j, r);
        bool accepted = false;
        double step = 0;
        while (lambda < 1e8) {
          Matrix damped = a;
          for (std::size_t c = 0; c < a.size(); ++c) damped[c][c] += lambda * (a[c][c] + 1e-12);
          std::vector<double> delta;
          std::vector<double> minus_g(g.size());
          for (std::size_t c = 0; c < g.size(); ++c) minus_g[c] = -g[c];
          if (!solve(damped, minus_g, delta)) break;
          std::vector<double> trial = theta;
          for (std::size_t c = 0; c < active.size(); ++c) trial[active[c]] += delta[c];
          clamp(trial);
          std::vector<double> rt = residuals(trial);
          const double ct = sum_sq(rt);
          if (ct < cost) {
            step = 0;
            for (std::size_t c = 0; c < active.size(); ++c) {
              step = std::max(step, std::abs(trial[active[c]] - theta[active[c]]));
            }
            const double gain = cost - ct;
            theta = trial;
            r = std::move(rt);
            cost = ct;
            lambda = std::max(lambda / 3.0, 1e-9);
            accepted = true;
            if (step < 1e-5 || gain < 1e-12 * std::max(cost, 1e-30)) step = 0;
            break;
          }
          lambda *= 4.0;
        }
        if (!accepted || step == 0) break;
        j = jacobian(theta, r, active);
      }
    }
    return summarize(theta, r, before, j, active);
  }

 private:
  static double sum_sq(const std::vector<double>& r) {
    double s = 0;
    for (double v : r) s += v * v;
    return s;
  }

  void clamp(std::vector<double>& theta) const {
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      if (scenario::is_scale(static_cast<FitParam>(p))) {
        theta[p] = std::clamp(theta[p], kMinLogScale, upper_[p]);
      } else {
        theta[p] = std::clamp(theta[p], 0.0, kMaxSlowdown);
      }
    }
  }

  static FitValues values(const std::vector<double>& theta) {
    FitValues v{};
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      v[p] = scenario::is_scale(static_cast<FitParam>(p)) ? std::exp(theta[p]) : theta[p];
    }
    return v;
  }

  double residual(std::size_t i, const std::vector<double>& theta) const {
    scenario::Scenario s = runs_[i]->scenario;
    scenario::apply_fit_values(s, values(theta));
    const RunComparison c = predict_measured(*runs_[i], s, plans_[i]);
    const double throughput_ratio =
        c.measured_is_step_time ? c.measured / c.predicted : c.predicted / c.measured;
    return std::log(std::max(throughput_ratio, 1e-12));
  }

  /// Evaluates residual(i, thetas[t]) for every (run, theta) pair on the worker threads.
  Matrix evaluate(const std::vector<std::vector<double>>& thetas) {
    const std::size_t n = runs_.size(), total = n * thetas.size();
    Matrix out(thetas.size(), std::vector<double>(n, 0.0));
    parallel_for(total, options_.threads,
                 [&](std::size_t k) { out[k / n][k % n] = residual(k % n, thetas[k / n]); });
    *done_ += static_cast<long>(total);
    *expected_ = std::max(*expected_, *done_);
    if (options_.progress) options_.progress(*done_, *expected_);
    return out;
  }

  std::vector<double> residuals(const std::vector<double>& theta) {
    return evaluate({theta}).front();
  }

  Matrix jacobian(const std::vector<double>& theta, const std::vector<double>& r,
                  const std::vector<int>& active) {
    std::vector<std::vector<double>> thetas;
    std::vector<double> steps;
    for (int p : active) {
      std::vector<double> t = theta;
      // Step away from a bound (the slow-down at 0 steps up, a scale at its cap down).
      const bool up =
          scenario::is_scale(static_cast<FitParam>(p)) ? theta[p] + kStep <= upper_[p] : true;
      t[p] += up ? kStep : -kStep;
      steps.push_back(up ? kStep : -kStep);
      thetas.push_back(std::move(t));
    }
    const Matrix shifted = evaluate(thetas);
    Matrix j(r.size(), std::vector<double>(active.size(), 0.0));
    for (std::size_t c = 0; c < active.size(); ++c) {
      for (std::size_t i = 0; i < r.size(); ++i) j[i][c] = (shifted[c][i] - r[i]) / steps[c];
    }
    return j;
  }

  static Matrix normal(const Matrix& j) {
    const std::size_t p = j.empty() ? 0 : j.front().size();
    Matrix a(p, std::vector<double>(p, 0.0));
    for (const auto& row : j) {
      for (std::size_t x = 0; x < p; ++x) {
        for (std::size_t y = 0; y < p; ++y) a[x][y] += row[x] * row[y];
      }
    }
    return a;
  }

  static std::vector<double> gradient(const Matrix& j, const std::vector<double>& r) {
    const std::size_t p = j.empty() ? 0 : j.front().size();
    std::vector<double> g(p, 0.0);
    for (std::size_t i = 0; i < r.size(); ++i) {
      for (std::size_t c = 0; c < p; ++c) g[c] += j[i][c] * r[i];
    }
    return g;
  }

  scenario::GpuFit summarize(const std::vector<double>& theta, const std::vector<double>& r,
                             const std::vector<double>& before, const Matrix& j,
                             const std::vector<int>& active) const {
    scenario::GpuFit fit;
    fit.gpu = runs_.front()->scenario.cluster.gpu.name;
    fit.runs = static_cast<int>(runs_.size());
    const FitValues v = values(theta);
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      fit.parameters[p].value = v[p];
      fit.parameters[p].determined = false;
    }
    const std::size_t n = r.size(), k = active.size();
    std::vector<double> loo = r;
    Matrix inv;
    if (k > 0 && invert(normal(j), inv)) {
      const double sigma2 = n > k ? sum_sq(r) / static_cast<double>(n - k) : 0.0;
      for (std::size_t c = 0; c < k; ++c) {
        auto& out = fit.parameters[active[c]];
        out.determined = true;
        out.stderr_ = std::sqrt(std::max(0.0, sigma2 * inv[c][c]));
      }
      for (std::size_t i = 0; i < n; ++i) {
        double h = 0;
        for (std::size_t x = 0; x < k; ++x) {
          for (std::size_t y = 0; y < k; ++y) h += j[i][x] * inv[x][y] * j[i][y];
        }
        loo[i] = r[i] / std::max(1.0 - h, 1e-3);
      }
    }
    // What the runs did not determine (the fit's curvature there was singular) stays neutral.
    for (int p = 0; p < scenario::kFitParamCount; ++p) {
      if (!fit.parameters[p].determined) {
        fit.parameters[p].value = scenario::neutral_value(static_cast<FitParam>(p));
      }
    }
    fit.median_abs_error_before = median_abs_error(before);
    fit.median_abs_error_after = median_abs_error(r);
    fit.median_abs_error_loo = median_abs_error(loo);
    fit.bias_before = bias(before);
    fit.bias_after = bias(r);
    return fit;
  }

  std::vector<const MeasuredRun*> runs_;
  std::vector<plan::StepPlan> plans_;
  std::vector<double> upper_;  ///< per parameter: the largest value (log of a scale)
  MeasuredFitOptions options_;
  long* done_ = nullptr;
  long* expected_ = nullptr;
};

}  // namespace

/// One chip at one clock: the SM count and the tensor-core peaks (not the memory).
std::string chip_of(const scenario::GpuSpec& g) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "sm%d/%.6g/%.6g/%.6g/%.6g", g.sm_count, g.peak_fp16, g.peak_bf16,
                g.peak_fp8, g.peak_fp32);
  return g.sm_count > 0 ? buf : g.name;  // no SM count: the name is all that identifies it
}

double log_residual(const MeasuredRun& run, const scenario::FitValues& values) {
  scenario::Scenario s = run.scenario;
  scenario::apply_fit_values(s, values);
  const RunComparison c = predict_measured(run, s, plan::build_plan(run.scenario));
  return std::log(c.measured_is_step_time ? c.measured / c.predicted : c.predicted / c.measured);
}

scenario::FittedProfile fit_measured_runs(const std::vector<MeasuredRun>& runs,
                                          const MeasuredFitOptions& options) {
  if (runs.empty()) throw SpecError("--measured", "no runs to fit");
  std::vector<std::string> order;
  std::map<std::string, std::vector<const MeasuredRun*>> by_gpu;
  std::map<std::string, std::vector<std::string>> names;  // group → its GPU names
  for (const auto& r : runs) {
    const scenario::GpuSpec& gpu = r.scenario.cluster.gpu;
    const std::string g = options.per_chip ? chip_of(gpu) : gpu.name;
    if (!by_gpu.count(g)) order.push_back(g);
    by_gpu[g].push_back(&r);
    auto& n = names[g];
    if (std::find(n.begin(), n.end(), gpu.name) == n.end()) n.push_back(gpu.name);
  }
  scenario::FittedProfile profile;
  long done = 0;
  // A first guess of the work: ~8 iterations of (parameters + 2) simulations per run.
  long expected = static_cast<long>(runs.size()) * (scenario::kFitParamCount + 2) * 8;
  for (const auto& g : order) {
    GroupFit group(by_gpu[g], options);
    const scenario::GpuFit fit = group.fit(done, expected);
    for (const auto& name : names[g]) {
      profile.gpus.push_back(fit);
      profile.gpus.back().gpu = name;
    }
  }
  if (options.progress) options.progress(done, done);
  return profile;
}

}  // namespace stratagem::tune
