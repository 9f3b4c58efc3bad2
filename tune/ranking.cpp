#include "tune/ranking.hpp"

#include <map>
#include <stdexcept>

namespace stratagem::tune {

double PairOrder::share() const {
  return pairs > 0 ? static_cast<double>(ordered_right) / pairs : 0.0;
}

double PairOrder::kendall_tau() const {
  return all_pairs > 0 ? static_cast<double>(concordant - discordant) / all_pairs : 0.0;
}

namespace {

std::string setting_of(const scenario::Scenario& s) {
  const auto& m = s.model;
  return s.cluster.gpu.name + " x" + std::to_string(s.cluster.world_size()) + ", s" +
         std::to_string(s.training.seq_len) + ", " + std::to_string(m.layers) + " layers x " +
         std::to_string(m.hidden);
}

// Throughput, whichever the row measured: a step time orders the other way.
double throughput(const RunComparison& r, double v) {
  return r.measured_is_step_time ? (v > 0 ? 1.0 / v : 0.0) : v;
}

int sign(double x) {
  return (x > 0) - (x < 0);
}

void add_pair(PairOrder& o, const RunComparison& a, const RunComparison& b, double min_gap) {
  const double ma = throughput(a, a.measured), mb = throughput(b, b.measured);
  const double pa = throughput(a, a.predicted), pb = throughput(b, b.predicted);
  const int measured = sign(ma - mb), predicted = sign(pa - pb);
  ++o.all_pairs;
  if (measured != 0 && predicted != 0) {
    if (measured == predicted) {
      ++o.concordant;
    } else {
      ++o.discordant;
    }
  }
  const double lo = std::min(ma, mb), hi = std::max(ma, mb);
  if (lo > 0 && hi / lo - 1 > min_gap) {
    ++o.pairs;
    if (measured == predicted) ++o.ordered_right;
  }
}

}  // namespace

Ranking rank_pairs(const std::vector<MeasuredRun>& runs, const std::vector<RunComparison>& rows,
                   double min_gap) {
  if (runs.size() != rows.size()) {
    throw std::invalid_argument("rank_pairs: one comparison per measured run");
  }
  std::map<std::string, std::vector<std::size_t>> by_setting;
  for (std::size_t i = 0; i < runs.size(); ++i)
    by_setting[setting_of(runs[i].scenario)].push_back(i);
  Ranking out;
  for (const auto& [setting, members] : by_setting) {
    if (members.size() < 2) continue;
    SettingOrder s{setting, static_cast<int>(members.size()), {}};
    for (std::size_t a = 0; a < members.size(); ++a) {
      for (std::size_t b = a + 1; b < members.size(); ++b) {
        add_pair(s.order, rows[members[a]], rows[members[b]], min_gap);
        add_pair(out.overall, rows[members[a]], rows[members[b]], min_gap);
      }
    }
    out.settings.push_back(std::move(s));
  }
  return out;
}

}  // namespace stratagem::tune
