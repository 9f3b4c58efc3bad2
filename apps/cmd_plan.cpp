// `stratagem plan <scenario> [--rank R] [--json] [--no-fold]`: a rank's ops, readably.
#include <iostream>

#include "apps/command.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/plan/builder.hpp"
#include "engine/plan/print.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string scenario;
  int rank = 0;
  bool json = false;
  bool no_fold = false;
};

int run(const Options& o) {
  const auto scenario = cli::load_scenario(o.scenario);
  if (o.rank < 0 || o.rank >= scenario.world_size()) {
    throw SpecError("--rank", "must be in [0, " + std::to_string(scenario.world_size() - 1) +
                                  "], got " + std::to_string(o.rank));
  }
  const auto plan = plan::build_plan(scenario, {.fold = !o.no_fold});
  // A folded replica has no ops of its own: show its representative's.
  const int shown = plan.ranks[o.rank].built ? o.rank : plan.ranks[o.rank].representative;
  if (o.json) {
    nlohmann::json j = plan::rank_to_json(plan, shown);
    j["requested_rank"] = o.rank;
    j["scenario"] = scenario.name;
    j["total_ops"] = plan.ops.size();
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << scenario.name << ": " << plan.ops.size() << " ops in the plan"
            << (plan.folded ? " (identical replicas folded)" : "") << "\n";
  if (shown != o.rank) {
    std::cout << "rank " << o.rank << " runs the same ops as rank " << shown
              << " (a data-, context- or tensor-parallel peer)"
              << "; showing rank " << shown << "\n";
  }
  plan::print_rank(std::cout, plan, shown);
  return 0;
}

Registration reg{
    {"plan", "Show the step plan of one rank: ops per stream with deps and memory", 30,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("scenario", o->scenario, "Scenario file or shipped name")->required();
       sub.add_option("--rank", o->rank, "Rank to show (default 0)");
       sub.add_flag("--json", o->json, "Print JSON");
       sub.add_flag("--no-fold", o->no_fold, "Build every data-parallel replica");
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace stratagem::cli
