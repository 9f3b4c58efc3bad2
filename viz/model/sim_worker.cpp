#include "viz/model/sim_worker.hpp"

#include <chrono>

#include "engine/scenario/error.hpp"
#include "sim/simulate.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem::viz {

std::shared_ptr<Document> simulate(const scenario::Scenario& scenario, const std::string& label) {
  sim::Simulation simulation = sim::simulate_scenario(scenario);
  auto doc = std::make_shared<Document>(std::move(simulation.result), label);
  doc->set_plan(std::make_shared<const plan::StepPlan>(std::move(simulation.plan)));
  return doc;
}

std::vector<std::shared_ptr<Document>> simulate_variants(const scenario::Scenario& base,
                                                         const std::vector<std::string>& names,
                                                         std::vector<std::string>& skipped) {
  std::vector<std::shared_ptr<Document>> docs;
  for (auto& v : tune::make_variants(base, names)) {
    if (!v.scenario) {
      skipped.push_back(v.name + ": " + v.error);
      continue;
    }
    try {
      docs.push_back(simulate(*v.scenario, v.name));
    } catch (const SpecError& e) {
      skipped.push_back(v.name + ": " + e.what());
    }
  }
  return docs;
}

SimWorker::SimWorker() : thread_([this] { loop(); }) {}

SimWorker::~SimWorker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::uint64_t SimWorker::submit(scenario::Scenario scenario, std::string label) {
  std::uint64_t id;
  {
    std::lock_guard lock(mutex_);
    id = ++next_request_;
    pending_.emplace(std::move(scenario), std::move(label));
    pending_request_ = id;
  }
  wake_.notify_all();
  return id;
}

std::optional<SimOutcome> SimWorker::poll() {
  std::lock_guard lock(mutex_);
  std::optional<SimOutcome> out;
  out.swap(done_);
  return out;
}

bool SimWorker::busy() const {
  std::lock_guard lock(mutex_);
  return running_ || pending_.has_value();
}

void SimWorker::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return !running_ && !pending_; });
}

void SimWorker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || pending_.has_value(); });
    if (stop_) return;
    auto [scenario, label] = std::move(*pending_);
    pending_.reset();
    const std::uint64_t request = pending_request_;
    running_ = true;
    lock.unlock();
    SimOutcome outcome;
    outcome.request = request;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      outcome.doc = simulate(scenario, label);
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    running_ = false;
    // A newer request supersedes this outcome only once it has its own.
    if (!done_ || done_->request < outcome.request) done_ = std::move(outcome);
    if (!pending_) idle_.notify_all();
  }
}

}  // namespace stratagem::viz
