#pragma once
// Shared by the importers (engine/scenario/import.hpp): what a config file says about a training
// run, before flags and the cluster rule, and the one builder that turns it into a scenario.
// import_accelerate.cpp reads accelerate's YAML, import_deepspeed.cpp DeepSpeed's JSON,
// import.cpp holds these helpers and build_scenario. Internal: not part of the spec API.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/import.hpp"

namespace YAML {
class Node;
}

namespace stratagem::scenario::import_detail {

struct Imported {
  std::string origin;  ///< "accelerate config x.yaml", "DeepSpeed config y.json"
  std::optional<int> num_processes;
  std::optional<int> num_machines;
  bool cpu = false;
  std::string sharding = "none";
  std::string precision = "no";
  nlohmann::json loss_scale = nlohmann::json::object();  ///< fp16 dynamic-scaling keys
  std::optional<int> micro_batch;
  std::optional<int> grad_accum;
  std::optional<std::int64_t> train_batch;  ///< DeepSpeed train_batch_size
  std::string train_batch_where;            ///< where train_batch_size was read, for errors
  std::string recompute = "none";
  std::string offload = "none";
  std::optional<int> prefetch;
  std::string optimizer;  ///< "" keeps the scenario default
  /// The training stack (scenario::Stack) the config's framework runs: "deepspeed" for a
  /// DeepSpeed config, "megatron" for accelerate's Megatron-LM plugin; "" keeps the default
  /// (pytorch: Accelerate's DDP and FSDP run the user's eager modules).
  std::string stack;
  // Model parallelism (Megatron-LM via accelerate, DeepSpeed AutoTP); dp = world / (tp × pp).
  int tp = 1;
  int pp = 1;
  bool sequence_parallel = false;
  std::string tp_where;  ///< where tp was read ("" when not given), for errors
  std::string pp_where;
  /// Scenario key paths ("strategy.tp") and where the file set them: an invalid imported
  /// scenario is reported against the file's key rather than the scenario's.
  std::vector<std::pair<std::string, std::string>> key_where;
  std::vector<std::string> notes;
};

std::string join(const std::vector<std::string>& items, const char* separator = ", ");

[[noreturn]] void unknown_value(const std::string& where, const std::string& value,
                                const std::vector<std::string>& valid, const std::string& why = "");

/// `value` if it is one of `valid`, else a SpecError listing them (with a "did you mean").
std::string pick(const std::string& where, const std::string& value,
                 const std::vector<std::string>& valid);

/// A decimal integer in [min, max] written as text (a YAML scalar).
std::int64_t parse_integer(const std::string& where, const std::string& text, std::int64_t min,
                           std::int64_t max);

/// A DeepSpeed JSON as DeepSpeed reads it: a key written twice keeps its last value, a null
/// reads as absent; `notes` says where either happened ("zero_optimization.stage written
/// twice (3:5 and 9:5; the last applies)", "train_batch_size is null (read as absent)").
struct DeepSpeedFile {
  nlohmann::json config;
  std::vector<std::string> notes;
};
DeepSpeedFile read_deepspeed_file(const std::string& file);

/// DeepSpeed's ds_config.json, already read (the accelerate reader follows
/// deepspeed_config_file with it).
Imported read_deepspeed(const std::string& file, const nlohmann::json& config);

/// What an accelerate config asks for that Stratagem does not do, for the one warning line of
/// `stratagem import --accelerate` and `stratagem launch --config_file`: key paths
/// ("fsdp_config.fsdp_state_dict_type"), some with what happens instead ("... (as bf16)").
struct AccelerateWarnings {
  std::vector<std::string> both;         ///< honoured by neither command
  std::vector<std::string> import_only;  ///< not modelled by the import (the Accelerator runs it)
  std::vector<std::string> launch_only;  ///< not run by the Accelerator (the import models it)
  std::vector<std::string> unknown;      ///< keys accelerate does not write
  std::string sharding_key;              ///< where the sharding was read, for launch's remaps
};

/// Whether a config value asks for something: not absent, null, false, 'no', 'none', 0, an
/// empty list or mapping, nor `unset` (a key's own default, such as "1" for a size).
bool accelerate_value_set(const YAML::Node& value, const char* unset = nullptr);

/// Sorts the keys of an accelerate config (`root`) against the keys `accelerate config` and
/// `accelerate launch` know: those neither command honours, when set, go to `w.both`; keys
/// accelerate does not know go to `w.unknown`. Of the sections, only the one `distributed_type`
/// reads (fsdp_config, deepspeed_config, megatron_lm_config) is looked into.
void scan_accelerate_keys(const YAML::Node& root, const std::string& distributed_type,
                          AccelerateWarnings& w);

/// "file: not honoured: a, b (as x); unknown keys, ignored: c", the lists sorted, or "" when
/// nothing is named. `launch` picks launch_only, else import_only, besides `both`.
std::string accelerate_warning(const std::string& file, const AccelerateWarnings& w, bool launch);

/// Flags, the cluster rule and the parallel layout applied to `in`; validated by
/// parse_scenario, whose errors name the file (and the file's key where one set the value).
nlohmann::json build_scenario(const Imported& in, const ImportOptions& o, const std::string& file);

}  // namespace stratagem::scenario::import_detail
