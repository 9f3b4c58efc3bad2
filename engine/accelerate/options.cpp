#include "engine/accelerate/options.hpp"

#include <cstdlib>
#include <sstream>

#include "engine/scenario/error.hpp"

extern char** environ;

namespace stratagem::accelerate {

namespace {

std::int64_t integer(const std::string& name, const std::string& v, std::int64_t min) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size())
    throw SpecError(name, "expected an integer, got \"" + v + "\"");
  if (n < min) throw SpecError(name, "must be >= " + std::to_string(min) + ", got " + v);
  return n;
}

double number(const std::string& name, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !(x > 0)) {
    throw SpecError(name, "expected a positive number, got \"" + v + "\"");
  }
  return x;
}

bool flag(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no" || v.empty()) return false;
  throw SpecError(name, "expected 1 or 0, got \"" + v + "\"");
}

}  // namespace

AcceleratorOptions AcceleratorOptions::from_env() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos && kv.rfind("STRATAGEM_", 0) == 0) {
      vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  return from_vars(vars);
}

AcceleratorOptions AcceleratorOptions::from_vars(const std::map<std::string, std::string>& vars) {
  AcceleratorOptions o;
  auto get = [&](const char* name) -> const std::string* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : &it->second;
  };
  if (const auto* v = get("STRATAGEM_SHARDING")) {
    o.sharding = scenario::parse_sharding(*v, "STRATAGEM_SHARDING");
    if (o.sharding == scenario::Sharding::zero3) o.sharding = scenario::Sharding::fsdp_full_shard;
    if (o.sharding == scenario::Sharding::fsdp_hybrid_shard) {
      throw SpecError("STRATAGEM_SHARDING",
                      "HYBRID_SHARD is not available in the Accelerator; use FULL_SHARD");
    }
  }
  if (const auto* v = get("STRATAGEM_MIXED_PRECISION")) {
    if (*v == "no") {
      o.mixed_precision = scenario::Precision::no;
    } else if (*v == "fp16") {
      o.mixed_precision = scenario::Precision::fp16;
    } else if (*v == "bf16") {
      o.mixed_precision = scenario::Precision::bf16;
    } else {
      throw SpecError("STRATAGEM_MIXED_PRECISION", "expected no, fp16 or bf16, got \"" + *v + "\"");
    }
  }
  if (const auto* v = get("STRATAGEM_CPU")) o.cpu = flag("STRATAGEM_CPU", *v);
  if (const auto* v = get("STRATAGEM_GRADIENT_ACCUMULATION_STEPS")) {
    o.gradient_accumulation_steps =
        static_cast<int>(integer("STRATAGEM_GRADIENT_ACCUMULATION_STEPS", *v, 1));
  }
  if (const auto* v = get("STRATAGEM_BUCKET_MB")) o.bucket_mb = number("STRATAGEM_BUCKET_MB", *v);
  if (const auto* v = get("STRATAGEM_FSDP_WRAP_CLS")) {
    std::stringstream parts(*v);
    std::string name;
    while (std::getline(parts, name, ',')) {
      if (!name.empty()) o.fsdp_wrap_cls.push_back(name);
    }
  }
  if (const auto* v = get("STRATAGEM_FSDP_MIN_NUM_PARAMS")) {
    o.fsdp_min_num_params = integer("STRATAGEM_FSDP_MIN_NUM_PARAMS", *v, 0);
  }
  if (const auto* v = get("STRATAGEM_MEASURE_MODEL")) {
    o.measure_model = flag("STRATAGEM_MEASURE_MODEL", *v);
  }
  if (const auto* v = get("STRATAGEM_SPLIT_BATCHES")) {
    o.split_batches = flag("STRATAGEM_SPLIT_BATCHES", *v);
  }
  if (const auto* v = get("STRATAGEM_EVEN_BATCHES")) {
    o.even_batches = flag("STRATAGEM_EVEN_BATCHES", *v);
  }
  if (const auto* v = get("STRATAGEM_SEED")) {
    o.seed = static_cast<std::uint64_t>(integer("STRATAGEM_SEED", *v, 0));
  }
  if (const auto* v = get("STRATAGEM_LOG_WITH")) o.log_with = *v;
  if (const auto* v = get("STRATAGEM_PROJECT_DIR")) {
    if (v->empty()) throw SpecError("STRATAGEM_PROJECT_DIR", "must not be empty");
    o.project_dir = *v;
  }
  if (const auto* v = get("STRATAGEM_DEBUG")) o.debug = flag("STRATAGEM_DEBUG", *v);
  if (const auto* v = get("STRATAGEM_TIMEOUT")) {
    o.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(number("STRATAGEM_TIMEOUT", *v) * 1000));
  }
  if (const auto* v = get("STRATAGEM_TP_SIZE")) {
    o.tp_size = static_cast<int>(integer("STRATAGEM_TP_SIZE", *v, 1));
  }
  if (const auto* v = get("STRATAGEM_PIPELINE_STAGES")) {
    o.pipeline_stages = static_cast<int>(integer("STRATAGEM_PIPELINE_STAGES", *v, 1));
  }
  if (const auto* v = get("STRATAGEM_PIPELINE_SCHEDULE")) {
    if (*v == "gpipe") {
      o.pipeline_schedule = scenario::Schedule::gpipe;
    } else if (*v == "1f1b") {
      o.pipeline_schedule = scenario::Schedule::one_f_one_b;
    } else {
      throw SpecError("STRATAGEM_PIPELINE_SCHEDULE", "expected gpipe or 1f1b, got \"" + *v + "\"");
    }
  }
  if (const auto* v = get("STRATAGEM_PIPELINE_MICRO_BATCHES")) {
    o.pipeline_micro_batches = static_cast<int>(integer("STRATAGEM_PIPELINE_MICRO_BATCHES", *v, 1));
  }
  return o;
}

}  // namespace stratagem::accelerate
