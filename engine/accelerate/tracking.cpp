// Accelerator::init_trackers / log / end_training: the main process's trackers
// (trackers.hpp); the other processes do nothing, as in Accelerate.
#include "engine/accelerate/accelerator.hpp"
#include "engine/accelerate/trackers.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

void Accelerator::init_trackers(const std::string& project, const nlohmann::json& config,
                                const std::string& log_with) {
  const std::string kinds = !log_with.empty()           ? log_with
                            : !options_.log_with.empty() ? options_.log_with
                                                         : "jsonl";
  const char* field = !log_with.empty() ? "init_trackers(log_with)" : "STRATAGEM_LOG_WITH";
  const auto parsed = parse_trackers(kinds, field);  // every process checks it
  if (!is_main_process()) return;
  trackers_ = std::make_unique<Trackers>(parsed, options_.project_dir, project, config);
}

void Accelerator::log(const nlohmann::json& values, std::int64_t step) {
  if (!is_main_process()) return;
  if (!trackers_) throw SpecError("log", "call init_trackers() first");
  trackers_->log(values, step);
}

void Accelerator::end_training() {
  if (trackers_) trackers_->close();
}

}  // namespace stratagem::accelerate
