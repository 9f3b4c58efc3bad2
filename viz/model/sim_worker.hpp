#pragma once
// Simulation for the viewer: one scenario to a Document (plan attached, for dependencies),
// the named strategy variants of a scenario, and a worker thread that re-simulates what-if
// edits off the UI thread. The worker keeps only the newest request: edits made while a
// simulation runs replace each other, and the UI shows the last result until a newer one
// is ready.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "viz/model/document.hpp"

namespace stratagem::viz {

/// Builds the plan, simulates it with the scenario's cost models. Throws SpecError for a
/// scenario the builders cannot express, RuntimeError when the simulation fails.
std::shared_ptr<Document> simulate(const scenario::Scenario& scenario, const std::string& label);

/// Simulates the named variants (sim/strategy_variants.hpp) of `base`. Variants invalid for
/// it are skipped and described in `skipped` ("zero3: <reason>").
std::vector<std::shared_ptr<Document>> simulate_variants(const scenario::Scenario& base,
                                                         const std::vector<std::string>& names,
                                                         std::vector<std::string>& skipped);

struct SimOutcome {
  std::uint64_t request = 0;
  std::shared_ptr<Document> doc;  ///< null when the request failed
  std::string error;              ///< the SpecError or RuntimeError text
  double wall_s = 0;              ///< how long the simulation took (shown in the UI)
};

class SimWorker {
 public:
  SimWorker();
  ~SimWorker();
  SimWorker(const SimWorker&) = delete;
  SimWorker& operator=(const SimWorker&) = delete;

  /// Queues a simulation; returns its request number.
  std::uint64_t submit(scenario::Scenario scenario, std::string label);
  /// The newest finished outcome not returned before, if any.
  std::optional<SimOutcome> poll();
  /// True while a request is queued or running.
  bool busy() const;
  /// Blocks until nothing is queued or running.
  void wait_idle();

 private:
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::optional<std::pair<scenario::Scenario, std::string>> pending_;
  std::uint64_t next_request_ = 0;
  std::uint64_t pending_request_ = 0;
  bool running_ = false;
  bool stop_ = false;
  std::optional<SimOutcome> done_;
  std::thread thread_;
};

}  // namespace stratagem::viz
