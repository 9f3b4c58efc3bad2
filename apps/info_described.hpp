#pragma once
// `stratagem info` on a mixture-of-experts model, or one the planner does not model yet
// (scenario::unsimulated_feature: latent attention, ...; `why` names it, empty otherwise):
// each kind of block, total and active parameters, FLOPs per token, and for an MoE model one
// rank's expert-parallel load.
#include <nlohmann/json.hpp>

#include "engine/scenario/scenario.hpp"

namespace stratagem::cli {

void print_described(const scenario::Scenario& s, const scenario::UnsimulatedFeature& why);
nlohmann::json described_json(const scenario::Scenario& s, const scenario::UnsimulatedFeature& why);

}  // namespace stratagem::cli
