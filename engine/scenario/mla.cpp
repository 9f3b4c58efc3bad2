#include "engine/scenario/mla.hpp"

#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

MlaSpec parse_mla(const nlohmann::json& object, const std::string& path) {
  constexpr std::int64_t kBig = std::int64_t{1} << 30;
  ObjectReader r(object, path);
  MlaSpec mla;
  mla.q_lora_rank = r.integer_or("q_lora_rank", 0, 0, kBig);
  mla.kv_lora_rank = r.integer("kv_lora_rank", 1, kBig);
  mla.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1, kBig);
  mla.qk_rope_head_dim = r.integer("qk_rope_head_dim", 1, kBig);
  mla.v_head_dim = r.integer("v_head_dim", 1, kBig);
  r.finish();
  return mla;
}

nlohmann::json to_json(const MlaSpec& mla) {
  return {{"q_lora_rank", mla.q_lora_rank},
          {"kv_lora_rank", mla.kv_lora_rank},
          {"qk_nope_head_dim", mla.qk_nope_head_dim},
          {"qk_rope_head_dim", mla.qk_rope_head_dim},
          {"v_head_dim", mla.v_head_dim}};
}

double mla_matmul_params(const MlaSpec& mla, std::int64_t hidden, std::int64_t heads) {
  const double h = static_cast<double>(hidden), a = static_cast<double>(heads);
  const double rq = static_cast<double>(mla.q_lora_rank);
  const double rkv = static_cast<double>(mla.kv_lora_rank);
  const double qk = static_cast<double>(mla.qk_nope_head_dim + mla.qk_rope_head_dim);
  const double q = mla.q_lora_rank > 0 ? h * rq + rq * a * qk : h * a * qk;
  const double kv = h * (rkv + static_cast<double>(mla.qk_rope_head_dim)) +
                    rkv * a * static_cast<double>(mla.qk_nope_head_dim + mla.v_head_dim);
  const double o = a * static_cast<double>(mla.v_head_dim) * h;
  return q + kv + o;
}

double mla_params(const MlaSpec& mla, std::int64_t hidden, std::int64_t heads) {
  return mla_matmul_params(mla, hidden, heads) + static_cast<double>(mla.q_lora_rank) +
         static_cast<double>(mla.kv_lora_rank);
}

}  // namespace stratagem::scenario
