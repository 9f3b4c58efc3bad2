#pragma once
// Turns what users already have into a scenario: an accelerate config (YAML) or a DeepSpeed
// config (JSON). The model and cluster come from flags, since neither file names them.
#include <string>

#include <nlohmann/json.hpp>

namespace stratagem::spec {

struct ImportOptions {
  std::string model = "llama2-7b";   ///< model preset
  std::string cluster;               ///< cluster preset; "" picks by GPU count
  std::string gpu;                   ///< GPU preset override ("" keeps the cluster's)
  std::int64_t seq_len = 2048;
  int micro_batch_size = 0;          ///< 0: from the file, else 1
};

/// accelerate's config.yaml → scenario JSON (validated by parse_scenario before returning).
nlohmann::json import_accelerate(const std::string& yaml_file, const ImportOptions& options);
/// DeepSpeed's ds_config.json → scenario JSON (validated).
nlohmann::json import_deepspeed(const std::string& json_file, const ImportOptions& options);

}  // namespace stratagem::spec
