#include "engine/scenario/moe.hpp"

#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

const char* to_string(RouterKind r) {
  return r == RouterKind::sigmoid_bias ? "sigmoid_bias" : "topk_softmax";
}

MoeSpec parse_moe(const nlohmann::json& object, const std::string& path, std::int64_t layers) {
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  ObjectReader r(object, path);
  MoeSpec moe;
  moe.experts = r.integer("experts", 1, 1 << 20);
  moe.top_k = r.integer("top_k", 1, moe.experts);
  moe.expert_ffn_hidden = r.integer("expert_ffn_hidden", 1, kBig);
  moe.shared_experts = r.integer_or("shared_experts", 0, 0, 1 << 10);
  moe.shared_expert_ffn_hidden =
      r.integer_or("shared_expert_ffn_hidden", moe.expert_ffn_hidden, 1, kBig);
  if (moe.shared_experts == 0 && r.has("shared_expert_ffn_hidden")) {
    throw SpecError(r.child_path("shared_expert_ffn_hidden"),
                    "is given but shared_experts is 0; set shared_experts or drop it");
  }
  moe.dense_layers = r.integer_or("dense_layers", 0, 0, layers - 1);
  moe.layer_freq = r.integer_or("layer_freq", 1, 1, layers - moe.dense_layers);
  moe.router =
      r.choice_or("router", "topk_softmax", {"topk_softmax", "sigmoid_bias"}) == "sigmoid_bias"
          ? RouterKind::sigmoid_bias
          : RouterKind::topk_softmax;
  moe.capacity_factor = r.number_or("capacity_factor", 0, 0, 1e6);
  if (r.has("capacity_factor") && moe.capacity_factor < 1.0) {
    throw SpecError(r.child_path("capacity_factor"),
                    "must be >= 1 (a multiple of each expert's balanced share of tokens); leave "
                    "it out for dropless routing");
  }
  r.finish();
  return moe;
}

nlohmann::json to_json(const MoeSpec& moe) {
  nlohmann::json j = {{"experts", moe.experts},
                      {"top_k", moe.top_k},
                      {"expert_ffn_hidden", moe.expert_ffn_hidden},
                      {"shared_experts", moe.shared_experts},
                      {"dense_layers", moe.dense_layers},
                      {"layer_freq", moe.layer_freq},
                      {"router", to_string(moe.router)}};
  if (moe.shared_experts > 0) j["shared_expert_ffn_hidden"] = moe.shared_expert_ffn_hidden;
  if (moe.capacity_factor > 0) j["capacity_factor"] = moe.capacity_factor;
  return j;
}

bool is_moe_block(const MoeSpec& moe, std::int64_t i) {
  return i >= moe.dense_layers && (i - moe.dense_layers + 1) % moe.layer_freq == 0;
}

std::int64_t moe_block_count(const MoeSpec& moe, std::int64_t layers) {
  return layers > moe.dense_layers ? (layers - moe.dense_layers) / moe.layer_freq : 0;
}

}  // namespace stratagem::scenario
