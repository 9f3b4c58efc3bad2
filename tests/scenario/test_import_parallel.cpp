// Importing tensor and pipeline parallelism: accelerate's MEGATRON_LM configs and DeepSpeed's
// AutoTP `tensor_parallel` block.
#include <gtest/gtest.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/scenario.hpp"
#include "tests/scenario/import_test_util.hpp"
#include "tests/scenario/temp_files.hpp"

namespace stratagem::scenario {
namespace {

// ---- tensor and pipeline parallelism ---------------------------------------------------

// accelerate's MEGATRON_LM config as `accelerate config` writes it (the example in
// docs/scenarios.md).
const std::string kMegatronYaml =
    std::string(STRATAGEM_SOURCE_DIR) + "/tests/scenario/megatron_lm_tp2_pp2.yaml";

TEST(ImportMegatron, RealShapedConfigIsDp2Tp2Pp2) {
  const nlohmann::json j = import_accelerate(kMegatronYaml, llama());
  const nlohmann::json& st = j["strategy"];
  EXPECT_EQ(st["dp"], 2);
  EXPECT_EQ(st["tp"], 2);
  EXPECT_EQ(st["pp"], 2);
  EXPECT_EQ(st["sequence_parallel"], true);
  EXPECT_EQ(st["schedule"], "1f1b");
  EXPECT_EQ(st["grad_accum"], 4);  // megatron_lm_num_micro_batches
  EXPECT_EQ(st["micro_batch_size"], 1);
  EXPECT_EQ(st["sharding"], "zero1");       // megatron_lm_use_distributed_optimizer
  EXPECT_EQ(st["recompute"], "selective");  // megatron_lm_recompute_activations
  EXPECT_EQ(st["mixed_precision"], "bf16");
  EXPECT_EQ(j["cluster"]["gpus_per_node"], 8);
  EXPECT_EQ(j["training"]["global_batch"], 1 * 4 * 2);  // micro × micro-batches × dp
  const std::string description = j["description"];
  expect_has(description, "dp × tp × pp = 2 × 2 × 2");
  expect_has(description, "megatron_lm_gradient_clipping: 1.0 is not modelled");
  const Scenario s = parse_scenario(j);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.strategy.tp, 2);
  EXPECT_TRUE(s.strategy.sequence_parallel);
  EXPECT_EQ(s.strategy.schedule, Schedule::one_f_one_b);
  EXPECT_EQ(s.strategy.sharding, Sharding::zero1);
  EXPECT_EQ(s.strategy.recompute, Recompute::selective);
}

TEST(ImportMegatron, DistributedOptimizerAndRecomputeEachAlone) {
  const test::TempDir dir("import-megatron-keys");
  const std::string zero1 = dir.write("zero1.yaml", yaml(R"(distributed_type: MEGATRON_LM
megatron_lm_config:
  megatron_lm_gradient_clipping: 0.0
  megatron_lm_pp_degree: 1
  megatron_lm_recompute_activations: false
  megatron_lm_sequence_parallelism: false
  megatron_lm_tp_degree: 4
  megatron_lm_use_distributed_optimizer: true
mixed_precision: bf16
num_machines: 1
num_processes: 8
)"));
  const nlohmann::json z = import_accelerate(zero1, llama());
  EXPECT_EQ(z["strategy"]["dp"], 2);
  EXPECT_EQ(z["strategy"]["tp"], 4);
  EXPECT_EQ(z["strategy"]["pp"], 1);
  EXPECT_FALSE(z["strategy"].contains("schedule"));
  EXPECT_FALSE(z["strategy"].contains("sequence_parallel"));
  EXPECT_EQ(z["strategy"]["sharding"], "zero1");
  EXPECT_EQ(z["strategy"]["recompute"], "none");
  EXPECT_EQ(z["description"].get<std::string>().find("gradient_clipping"), std::string::npos);
  EXPECT_NO_THROW(parse_scenario(z));

  const std::string selective = dir.write("sel.yaml", yaml(R"(distributed_type: MEGATRON_LM
megatron_lm_config:
  megatron_lm_recompute_activations: true
  megatron_lm_tp_degree: 2
  megatron_lm_use_distributed_optimizer: false
num_machines: 1
num_processes: 8
)"));
  const Scenario s = parse_scenario(import_accelerate(selective, llama()));
  EXPECT_EQ(s.strategy.recompute, Recompute::selective);
  EXPECT_EQ(s.strategy.sharding, Sharding::none);
  EXPECT_EQ(s.strategy.dp, 4);
  EXPECT_FALSE(s.strategy.sequence_parallel);
}

TEST(ImportMegatron, NoSectionMeansTp1Pp1AndUnknownKeysAreIgnored) {
  const test::TempDir dir("import-megatron-defaults");
  const std::string bare = dir.write(
      "bare.yaml", yaml("distributed_type: MEGATRON_LM\nnum_machines: 1\nnum_processes: 8\n"));
  const nlohmann::json j = import_accelerate(bare, llama());
  EXPECT_EQ(j["strategy"]["dp"], 8);
  EXPECT_EQ(j["strategy"]["pp"], 1);
  EXPECT_FALSE(j["strategy"].contains("tp"));
  EXPECT_EQ(j["strategy"]["sharding"], "none");
  // Megatron-LM turns sequence parallelism off with tp = 1; so does the import, and says so.
  const std::string sp1 = dir.write("sp1.yaml", yaml(R"(distributed_type: MEGATRON_LM
megatron_lm_config:
  megatron_lm_sequence_parallelism: true
  megatron_lm_some_future_key: 3
num_processes: 4
)"));
  const nlohmann::json k = import_accelerate(sp1, llama());
  EXPECT_FALSE(k["strategy"].contains("sequence_parallel"));
  expect_has(k["description"], "megatron_lm_sequence_parallelism is off with tp = 1");
  EXPECT_NO_THROW(parse_scenario(k));
}

TEST(ImportMegatron, Errors) {
  const test::TempDir dir("import-megatron-errors");
  auto check = [&](const std::string& megatron, const std::string& key, const std::string& part,
                   const std::string& rest = "num_machines: 1\nnum_processes: 8\n",
                   ImportOptions o = llama()) {
    const std::string file = dir.write(
        "m.yaml", "distributed_type: MEGATRON_LM\nmegatron_lm_config:\n" + megatron + rest);
    const Caught c = error_of([&] { import_accelerate(file, o); });
    EXPECT_EQ(c.path.rfind(file + ":", 0), 0u) << c.path;  // file:line:col: key
    expect_has(c.path, "megatron_lm_config." + key);
    expect_has(c.what, part);
    EXPECT_EQ(c.what.find('\n'), std::string::npos);
  };
  check("  megatron_lm_tp_degree: 3\n", "megatron_lm_tp_degree",
        "tp = 3 does not divide the 8 processes");
  check("  megatron_lm_tp_degree: 4\n  megatron_lm_pp_degree: 3\n", "megatron_lm_pp_degree",
        "tp × pp = 4 × 3 = 12 does not divide the 8 processes");
  check("  megatron_lm_tp_degree: two\n", "megatron_lm_tp_degree",
        "expected an integer or 'auto', got 'two'");
  check("  megatron_lm_tp_degree: 0\n", "megatron_lm_tp_degree", "must be in [1, 1024], got 0");
  check("  megatron_lm_tp_degree: 2\n  megatron_lm_sequence_parallelism: maybe\n",
        "megatron_lm_sequence_parallelism", "expected true or false, got 'maybe'");
  check("  megatron_lm_gradient_clipping: strong\n", "megatron_lm_gradient_clipping",
        "expected a number");
  check("  megatron_lm_num_micro_batches: 4\n", "megatron_lm_num_micro_batches",
        "4 disagrees with gradient_accumulation_steps 2",
        "gradient_accumulation_steps: 2\nnum_processes: 8\n");
  // The scenario's own rules, reported at the key that set the value.
  ImportOptions gpt2xl = llama(1024);
  gpt2xl.model = "gpt2-xl";  // 25 heads
  check("  megatron_lm_tp_degree: 2\n", "megatron_lm_tp_degree",
        "the imported scenario is invalid: strategy.tp: tp = 2 must divide the model's attention "
        "heads (25)",
        "num_processes: 8\n", gpt2xl);
  ImportOptions two_nodes = llama();
  two_nodes.cluster = "dgx-a100-80gb";
  check("  megatron_lm_tp_degree: 16\n", "megatron_lm_tp_degree", "must divide gpus_per_node (8)",
        "num_machines: 2\nnum_processes: 16\n", two_nodes);
  ImportOptions gpt2 = llama(1024);
  gpt2.model = "gpt2";  // 12 layers
  check("  megatron_lm_pp_degree: 16\n", "megatron_lm_pp_degree",
        "strategy.pp: pp = 16 exceeds the model's 12 layers",
        "num_machines: 2\nnum_processes: 16\n", gpt2);
}

TEST(ImportMegatron, LaunchRefusesTensorAndPipelineParallelism) {
  const Caught c = error_of([] { read_accelerate_launch_config(kMegatronYaml); });
  expect_has(c.path, "megatron_lm_config.megatron_lm_tp_degree");
  expect_has(c.what, "the Accelerator runs no tensor parallelism");
  const test::TempDir dir("launch-megatron");
  const std::string pp = dir.write("pp.yaml", yaml(R"(distributed_type: MEGATRON_LM
megatron_lm_config:
  megatron_lm_pp_degree: 2
num_processes: 4
)"));
  expect_has(error_of([&] { read_accelerate_launch_config(pp); }).path,
             "megatron_lm_config.megatron_lm_pp_degree");
  const std::string dp = dir.write("dp.yaml", yaml(R"(distributed_type: MEGATRON_LM
megatron_lm_config:
  megatron_lm_tp_degree: 1
  megatron_lm_use_distributed_optimizer: true
num_processes: 4
)"));
  const AccelerateLaunchConfig cfg = read_accelerate_launch_config(dp);
  EXPECT_EQ(cfg.sharding, "zero1");
  EXPECT_EQ(cfg.num_processes, 4);
}

// `accelerate config` writes FSDP with a size-based (or no) wrap policy without any
// fsdp_transformer_layer_cls_to_wrap: launching it read an absent node (yaml-cpp's "invalid
// node" error, exit 1).
TEST(ImportAccelerate, FsdpWithoutAWrapClassLaunchesAndImports) {
  const test::TempDir dir("fsdp-size-wrap");
  const std::string size = dir.write("size.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 100000
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_offload_params: false
mixed_precision: bf16
num_machines: 1
num_processes: 8
)"));
  const AccelerateLaunchConfig cfg = read_accelerate_launch_config(size);
  EXPECT_TRUE(cfg.fsdp_wrap_cls.empty());
  EXPECT_EQ(cfg.fsdp_min_num_params, 100000);
  EXPECT_EQ(cfg.num_processes, 8);
  EXPECT_NO_THROW(import_accelerate(size, llama()));
  const std::string none = dir.write("none.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: NO_WRAP
  fsdp_sharding_strategy: SHARD_GRAD_OP
num_processes: 2
use_cpu: true
)"));
  EXPECT_TRUE(read_accelerate_launch_config(none).fsdp_wrap_cls.empty());
}

TEST(ImportDeepSpeed, AutoTpSize4On8GpusIsDp2Tp4) {
  const test::TempDir dir("ds-autotp");
  const std::string file = dir.write("ds_autotp.json", R"({
    "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "tensor_parallel": {"autotp_size": 4},
    "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}})");
  ImportOptions o = llama();
  o.num_processes = 8;
  const nlohmann::json j = import_deepspeed(file, o);
  EXPECT_EQ(j["strategy"]["dp"], 2);
  EXPECT_EQ(j["strategy"]["tp"], 4);
  EXPECT_EQ(j["strategy"]["pp"], 1);
  EXPECT_FALSE(j["strategy"].contains("sequence_parallel"));  // AutoTP has none
  EXPECT_EQ(j["training"]["global_batch"], 2);
  const Scenario s = parse_scenario(j);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.strategy.tp, 4);
  EXPECT_FALSE(s.strategy.sequence_parallel);
  // No process count: the cluster's 8 GPUs, as without tensor parallelism.
  EXPECT_EQ(import_deepspeed(file, llama())["strategy"]["dp"], 2);
}

TEST(ImportDeepSpeed, TrainBatchCountsDataParallelRanks) {
  const test::TempDir dir("ds-autotp-batch");
  // train_batch_size = micro × accumulation × dp: 16 = 2 × 4 × 2, on dp 2 × tp 4 = 8 GPUs.
  const std::string file = dir.write("ds.json", R"({
    "train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4, "tensor_parallel": {"tp_size": 4}})");
  const Scenario s = parse_scenario(import_deepspeed(file, llama()));
  EXPECT_EQ(s.strategy.dp, 2);
  EXPECT_EQ(s.strategy.tp, 4);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.training.global_batch, 16);
  // autotp_size 0 is DeepSpeed's "off"; an agreeing tp_size 1 is no conflict.
  const std::string off =
      dir.write("off.json", R"({"tensor_parallel": {"autotp_size": 0, "tp_size": 1}})");
  EXPECT_EQ(parse_scenario(import_deepspeed(off, llama())).strategy.tp, 1);
}

TEST(ImportDeepSpeed, TensorParallelErrors) {
  const test::TempDir dir("ds-autotp-errors");
  auto check = [&](const std::string& text, const std::string& key, const std::string& part,
                   ImportOptions o = llama()) {
    const std::string file = dir.write("tp.json", text);
    const Caught c = error_of([&] { import_deepspeed(file, o); });
    EXPECT_EQ(c.path, file + ": " + key);
    expect_has(c.what, part);
    EXPECT_EQ(c.what.find('\n'), std::string::npos);
  };
  check(R"({"tensor_parallel": {"autotp_size": 4, "tp_size": 2}})", "tensor_parallel.autotp_size",
        "4 disagrees with tensor_parallel.tp_size 2");
  check(R"({"tensor_parallel": {"autotp_size": "four"}})", "tensor_parallel.autotp_size",
        "expected an integer, got \"four\"");
  check(R"({"tensor_parallel": {"tp_size": 2.5}})", "tensor_parallel.tp_size",
        "expected an integer, got 2.5");
  check(R"({"tensor_parallel": 4})", "tensor_parallel", "expected an object");
  // A number where a string goes names the key (was nlohmann's type_error.302).
  check(R"({"optimizer": {"type": 5}})", "optimizer.type", "expected a string, got 5");
  check(R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": true}}})",
        "zero_optimization.offload_optimizer.device", "expected a string, got true");
  check(R"({"zero_optimization": {"offload_param": {"device": [1]}}})",
        "zero_optimization.offload_param.device", "expected a string, got [1]");
  ImportOptions six = llama();
  six.num_processes = 6;
  check(R"({"tensor_parallel": {"autotp_size": 4}})", "tensor_parallel.autotp_size",
        "tp = 4 does not divide the 6 processes", six);
  ImportOptions gpt2xl = llama(1024);
  gpt2xl.model = "gpt2-xl";
  check(R"({"tensor_parallel": {"autotp_size": 2}})", "tensor_parallel.autotp_size",
        "tp = 2 must divide the model's attention heads (25)", gpt2xl);
  ImportOptions eight = llama();
  eight.num_processes = 8;
  check(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 8, "tensor_parallel": {"autotp_size": 2}})",
        "train_batch_size",
        "64 ≠ train_micro_batch_size_per_gpu × gradient_accumulation_steps × data-parallel "
        "ranks = 4 × 8 × 4 = 128",
        eight);
}

TEST(ImportAccelerate, DeepSpeedConfigFileWithAutoTp) {
  const test::TempDir dir("import-ds-file-tp");
  dir.write("ds_tp.json", R"({"zero_optimization": {"stage": 2},
    "tensor_parallel": {"autotp_size": 2}})");
  const std::string file = dir.write("acc.yaml", yaml(R"(deepspeed_config:
  deepspeed_config_file: ds_tp.json
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 8
)"));
  const Scenario s = parse_scenario(import_accelerate(file, llama()));
  EXPECT_EQ(s.strategy.dp, 4);
  EXPECT_EQ(s.strategy.tp, 2);
  EXPECT_EQ(s.strategy.sharding, Sharding::zero2);
}

}  // namespace
}  // namespace stratagem::scenario
