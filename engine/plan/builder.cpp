#include "engine/plan/builder.hpp"

#include "engine/spec/error.hpp"

namespace stratagem::plan {

StepPlan build_plan(const spec::Scenario& scenario, const BuildOptions& options) {
  throw RuntimeError("plan builder: in progress");
}

}  // namespace stratagem::plan
