// Importing accelerate (YAML) and DeepSpeed (JSON) configs. The sample configs have the shape
// `accelerate config` writes (keys it always writes included) and the HF DeepSpeed examples.
#include <gtest/gtest.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/scenario.hpp"
#include "tests/scenario/import_test_util.hpp"
#include "tests/scenario/temp_files.hpp"

namespace stratagem::scenario {
namespace {

TEST(ImportAccelerate, MultiGpuIsDdp) {
  const test::TempDir dir("import-ddp");
  const std::string file = dir.write("ddp.yaml", yaml(R"(distributed_type: MULTI_GPU
gpu_ids: all
mixed_precision: bf16
num_machines: 1
num_processes: 8
use_cpu: false
)"));
  const nlohmann::json j = import_accelerate(file, llama());
  EXPECT_EQ(j["model"], "llama2-7b");
  EXPECT_EQ(j["cluster"]["preset"], "dgx-a100-80gb");
  EXPECT_EQ(j["cluster"]["nodes"], 1);
  EXPECT_EQ(j["cluster"]["gpus_per_node"], 8);
  EXPECT_EQ(j["strategy"]["dp"], 8);
  EXPECT_EQ(j["strategy"]["pp"], 1);
  EXPECT_EQ(j["strategy"]["sharding"], "none");
  EXPECT_EQ(j["strategy"]["mixed_precision"], "bf16");
  EXPECT_EQ(j["strategy"]["micro_batch_size"], 1);
  EXPECT_EQ(j["strategy"]["grad_accum"], 1);
  EXPECT_EQ(j["training"]["seq_len"], 2048);
  EXPECT_EQ(j["training"]["global_batch"], 8);
  const Scenario s = parse_scenario(j);
  EXPECT_EQ(s.world_size(), 8);
}

TEST(ImportAccelerate, FourProcessesOverrideTheClusterSize) {
  const test::TempDir dir("import-four");
  const std::string file = dir.write("four.yaml", yaml(R"(distributed_type: MULTI_GPU
mixed_precision: fp16
num_machines: 1
num_processes: 4
use_cpu: false
)"));
  const Scenario s = parse_scenario(import_accelerate(file, llama()));
  EXPECT_EQ(s.cluster.name, "dgx-a100-80gb");
  EXPECT_EQ(s.cluster.gpus_per_node, 4);
  EXPECT_EQ(s.strategy.precision, Precision::fp16);
}

TEST(ImportAccelerate, FsdpByName) {
  const test::TempDir dir("import-fsdp");
  const std::string file = dir.write("fsdp.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_activation_checkpointing: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: SHARD_GRAD_OP
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_use_orig_params: true
mixed_precision: bf16
num_machines: 1
num_processes: 8
use_cpu: false
)"));
  ImportOptions o = llama();
  o.micro_batch_size = 2;
  o.grad_accum = 4;
  const nlohmann::json j = import_accelerate(file, o);
  EXPECT_EQ(j["strategy"]["sharding"], "SHARD_GRAD_OP");
  EXPECT_EQ(j["strategy"]["recompute"], "full");
  EXPECT_EQ(j["strategy"]["prefetch"], 1);
  EXPECT_EQ(j["training"]["global_batch"], 2 * 4 * 8);
  EXPECT_NO_THROW(parse_scenario(j));
}

// Older accelerate versions write the sharding strategy as torch's enum value (1..5).
TEST(ImportAccelerate, FsdpByNumberAndHybridOnTwoMachines) {
  const test::TempDir dir("import-fsdp-num");
  const std::string file = dir.write("hybrid.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_backward_prefetch_policy: NO_PREFETCH
  fsdp_min_num_params: 0
  fsdp_offload_params: false
  fsdp_sharding_strategy: 4
main_process_ip: 10.0.0.1
main_process_port: 29500
mixed_precision: bf16
num_machines: 2
num_processes: 16
use_cpu: false
)"));
  const Scenario s = parse_scenario(import_accelerate(file, llama()));
  EXPECT_EQ(s.strategy.sharding, Sharding::fsdp_hybrid_shard);
  EXPECT_EQ(s.strategy.prefetch, 0);
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.strategy.dp, 16);

  const std::string one = dir.write("one.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_sharding_strategy: 1
num_machines: 1
num_processes: 2
)"));
  EXPECT_EQ(parse_scenario(import_accelerate(one, llama())).strategy.sharding,
            Sharding::fsdp_full_shard);
}

TEST(ImportAccelerate, Fsdp2ReshardAfterForward) {
  const test::TempDir dir("import-fsdp2");
  const std::string file = dir.write("fsdp2.yaml", yaml(R"(distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_reshard_after_forward: false
  fsdp_offload_params: true
mixed_precision: bf16
num_machines: 1
num_processes: 8
)"));
  const nlohmann::json j = import_accelerate(file, llama());
  EXPECT_EQ(j["strategy"]["sharding"], "SHARD_GRAD_OP");
  EXPECT_EQ(j["strategy"]["offload_optimizer"], "cpu");
  EXPECT_NE(j["description"].get<std::string>().find("fsdp_offload_params"), std::string::npos);
}

TEST(ImportAccelerate, DeepSpeedInline) {
  const test::TempDir dir("import-ds-inline");
  const std::string file = dir.write("ds.yaml", yaml(R"(deepspeed_config:
  gradient_accumulation_steps: 4
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
distributed_type: DEEPSPEED
mixed_precision: fp16
num_machines: 1
num_processes: 8
use_cpu: false
)"));
  const nlohmann::json j = import_accelerate(file, llama());
  EXPECT_EQ(j["strategy"]["sharding"], "zero2");
  EXPECT_EQ(j["strategy"]["offload_optimizer"], "cpu");
  EXPECT_EQ(j["strategy"]["grad_accum"], 4);
  EXPECT_EQ(j["strategy"]["mixed_precision"], "fp16");
  EXPECT_EQ(j["training"]["global_batch"], 32);
}

TEST(ImportAccelerate, DeepSpeedConfigFileNextToTheYaml) {
  const test::TempDir dir("import-ds-file");
  dir.write("ds_z3.json", R"({"zero_optimization": {"stage": 3},
    "bf16": {"enabled": "auto"},
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2})");
  const std::string file = dir.write("acc.yaml", yaml(R"(deepspeed_config:
  deepspeed_config_file: ds_z3.json
  zero3_init_flag: true
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 4
)"));
  const Scenario s = parse_scenario(import_accelerate(file, llama()));
  EXPECT_EQ(s.strategy.sharding, Sharding::zero3);
  EXPECT_EQ(s.strategy.precision, Precision::bf16);  // "auto" → accelerate's mixed_precision
  EXPECT_EQ(s.strategy.micro_batch_size, 2);
  EXPECT_EQ(s.strategy.dp, 4);
  EXPECT_EQ(s.training.global_batch, 16);
}

TEST(ImportAccelerate, CpuRunsGetTheCpuCluster) {
  const test::TempDir dir("import-cpu");
  const std::string file = dir.write("cpu.yaml", yaml(R"(distributed_type: MULTI_CPU
mixed_precision: 'no'
num_machines: 1
num_processes: 2
use_cpu: true
)"));
  ImportOptions o;
  o.model = "gpt2";
  o.seq_len = 128;
  const Scenario s = parse_scenario(import_accelerate(file, o));
  EXPECT_EQ(s.cluster.name, "laptop-cpu");
  EXPECT_EQ(s.cluster.gpu.name, "cpu");
  EXPECT_EQ(s.strategy.dp, 2);
  EXPECT_EQ(s.strategy.precision, Precision::no);
}

TEST(ImportAccelerate, FlagsWin) {
  const test::TempDir dir("import-flags");
  const std::string file = dir.write("f.yaml", yaml(R"(distributed_type: MULTI_GPU
mixed_precision: fp16
num_machines: 1
num_processes: 8
)"));
  ImportOptions o = llama(4096);
  o.cluster = "dgx-h100";
  o.num_processes = 16;
  o.num_machines = 2;
  o.mixed_precision = "bf16";
  o.gpu = "h100-80gb";
  const Scenario s = parse_scenario(import_accelerate(file, o));
  EXPECT_EQ(s.cluster.name, "dgx-h100");
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.strategy.dp, 16);
  EXPECT_EQ(s.strategy.precision, Precision::bf16);
  EXPECT_EQ(s.training.seq_len, 4096);
}

TEST(ImportAccelerate, SequenceLengthDefault) {
  const test::TempDir dir("import-seq");
  const std::string file = dir.write("s.yaml", "distributed_type: MULTI_GPU\nnum_processes: 8\n");
  ImportOptions o;
  o.model = "gpt2";  // 1024 learned positions
  EXPECT_EQ(import_accelerate(file, o)["training"]["seq_len"], 1024);
  o.model = "llama2-7b";  // rotary: the 2048 default
  EXPECT_EQ(import_accelerate(file, o)["training"]["seq_len"], 2048);
  o.model = "gpt2";
  o.seq_len = 4096;  // asked for, and too long: the scenario's own check
  EXPECT_THROW(import_accelerate(file, o), SpecError);
}

TEST(ImportAccelerate, SingleProcess) {
  const test::TempDir dir("import-no");
  const std::string file = dir.write(
      "no.yaml",
      yaml("distributed_type: 'NO'\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 1\n"));
  EXPECT_EQ(parse_scenario(import_accelerate(file, llama())).world_size(), 1);
}

// ---- errors ------------------------------------------------------------------------------

TEST(ImportErrors, MalformedYamlGivesLineAndColumn) {
  const test::TempDir dir("import-bad-yaml");
  const std::string file = dir.write("bad.yaml", R"(distributed_type: FSDP
fsdp_config:
  fsdp_sharding_strategy: [FULL_SHARD
num_processes: 8
)");
  const Caught c = error_of([&] { import_accelerate(file, llama()); });
  EXPECT_EQ(c.path.rfind(file + ":", 0), 0u) << c.path;
  EXPECT_EQ(c.path, file + ":4:14");
  expect_has(c.what, "invalid YAML");
  EXPECT_EQ(c.what.find('\n'), std::string::npos);
}

TEST(ImportErrors, ASecondYamlDocumentIsRefusedWhereItStarts) {
  const test::TempDir dir("import-two-docs");
  const std::string file = dir.write("two.yaml", R"(distributed_type: FSDP
num_processes: 8
---
distributed_type: MULTI_GPU
num_processes: 8
)");
  const Caught c = error_of([&] { import_accelerate(file, llama()); });
  EXPECT_EQ(c.path, file + ":4:1");
  expect_has(c.what, "second YAML document");
  EXPECT_EQ(c.what.find('\n'), std::string::npos);
}

TEST(ImportErrors, UnknownValuesNameTheKeyAndListValid) {
  const test::TempDir dir("import-bad-values");
  auto check = [&](const std::string& body, const std::string& key, const std::string& part) {
    const std::string file = dir.write("v.yaml", body);
    const Caught c = error_of([&] { import_accelerate(file, llama()); });
    expect_has(c.path, key);
    EXPECT_EQ(c.path.rfind(file + ":", 0), 0u) << c.path;  // file:line:col: key
    expect_has(c.what, part);
  };
  check("distributed_type: MULTI_GPUS\nnum_processes: 8\n", "distributed_type",
        "unknown value 'MULTI_GPUS' (did you mean 'MULTI_GPU'?); valid: NO, MULTI_GPU, "
        "MULTI_CPU, FSDP, DEEPSPEED");
  check("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHRAD\n",
        "fsdp_config.fsdp_sharding_strategy",
        "unknown value 'FULL_SHRAD' (did you mean 'FULL_SHARD'?); valid: FULL_SHARD (1), "
        "SHARD_GRAD_OP (2), NO_SHARD (3), HYBRID_SHARD (4)");
  check("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 9\n",
        "fsdp_config.fsdp_sharding_strategy", "must be in [1, 5], got 9");
  check("distributed_type: MULTI_GPU\nmixed_precision: fp9\n", "mixed_precision",
        "valid: no, fp16, bf16");
  check("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n",
        "deepspeed_config.zero_stage", "must be in [0, 3], got 4");
  check("distributed_type: DEEPSPEED\ndeepspeed_config:\n  offload_optimizer_device: nvmee\n",
        "deepspeed_config.offload_optimizer_device", "valid: none, cpu");
  check("distributed_type: MULTI_GPU\nnum_processes: eight\n", "num_processes",
        "expected an integer or 'auto', got 'eight'");
  check("distributed_type: MULTI_GPU\nuse_cpu: maybe\n", "use_cpu",
        "expected true or false, got 'maybe'");
  check("distributed_type: MULTI_GPU\nfsdp_config: [1, 2]\nnum_processes: {a: 1}\n",
        "num_processes", "expected a single value");
}

TEST(ImportErrors, ImpossibleLayouts) {
  const test::TempDir dir("import-layout");
  const std::string many =
      dir.write("many.yaml", "distributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 1\n");
  expect_has(error_of([&] { import_accelerate(many, llama()); }).what,
             "16 GPUs per machine exceed a DGX's 8; pass --cluster");
  const std::string uneven =
      dir.write("uneven.yaml", "distributed_type: MULTI_GPU\nnum_processes: 9\nnum_machines: 2\n");
  expect_has(error_of([&] { import_accelerate(uneven, llama()); }).what,
             "9 processes do not split evenly over 2 machines");
  // HYBRID_SHARD on one machine: the scenario's own rule, reported against the file.
  const std::string hybrid = dir.write("hybrid.yaml",
                                       "distributed_type: FSDP\nfsdp_config:\n  "
                                       "fsdp_sharding_strategy: HYBRID_SHARD\nnum_processes: 8\n");
  const Caught c = error_of([&] { import_accelerate(hybrid, llama()); });
  EXPECT_EQ(c.path, hybrid);
  expect_has(c.what, "the imported scenario is invalid: strategy.sharding: HYBRID_SHARD");
}

TEST(ImportErrors, UnknownModelAndMissingFile) {
  const test::TempDir dir("import-model");
  const std::string file = dir.write("ok.yaml", "distributed_type: MULTI_GPU\nnum_processes: 8\n");
  ImportOptions o = llama();
  o.model = "llama2-8b";
  const Caught c = error_of([&] { import_accelerate(file, o); });
  EXPECT_EQ(c.path, "--model");
  expect_has(c.what, "did you mean 'llama");
  const Caught missing = error_of([&] { import_accelerate(dir.path() + "/none.yaml", llama()); });
  EXPECT_EQ(missing.path, dir.path() + "/none.yaml");
  expect_has(missing.what, "cannot open file");
}

// ---- DeepSpeed ---------------------------------------------------------------------------

// The HF Trainer's ZeRO-2 example config, "auto" values and all.
const char* kZero2 = R"({
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
           "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
  "optimizer": {"type": "AdamW",
                "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto"}},
  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                        "allgather_partitions": true, "allgather_bucket_size": 2e8,
                        "overlap_comm": true, "reduce_scatter": true,
                        "reduce_bucket_size": 2e8, "contiguous_gradients": true},
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "steps_per_print": 2000,
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "wall_clock_breakdown": false
})";

TEST(ImportDeepSpeed, HfZero2ExampleWithAutoValues) {
  const test::TempDir dir("ds-zero2");
  const std::string file = dir.write("ds_config_zero2.json", kZero2);
  ImportOptions o = llama();
  o.mixed_precision = "fp16";  // decides fp16.enabled: "auto"
  o.micro_batch_size = 4;
  o.grad_accum = 2;
  const nlohmann::json j = import_deepspeed(file, o);
  EXPECT_EQ(j["strategy"]["sharding"], "zero2");
  EXPECT_EQ(j["strategy"]["offload_optimizer"], "cpu");
  EXPECT_EQ(j["strategy"]["mixed_precision"], "fp16");
  EXPECT_EQ(j["strategy"]["initial_scale_power"], 16);
  EXPECT_EQ(j["strategy"]["loss_scale_window"], 1000);
  EXPECT_EQ(j["strategy"]["hysteresis"], 2);
  EXPECT_EQ(j["strategy"]["min_loss_scale"], 1.0);
  EXPECT_EQ(j["strategy"]["optimizer"], "adamw");
  EXPECT_EQ(j["cluster"]["preset"], "dgx-a100-80gb");
  EXPECT_EQ(j["strategy"]["dp"], 8);  // no process count anywhere: the cluster's GPUs
  EXPECT_EQ(j["training"]["global_batch"], 4 * 2 * 8);
  const Scenario s = parse_scenario(j);
  EXPECT_EQ(s.strategy.loss_scale.initial_scale_power, 16);
}

// #44 item 3: DeepSpeed (Python's json) keeps the last of a key written twice and reads a null
// as the key's default; the import does the same and names both in its one warning line.
TEST(ImportDeepSpeed, KeysWrittenTwiceAndNullsAreNamed) {
  const test::TempDir dir("ds-dup");
  const std::string file = dir.write("ds.json", R"({
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 1, "stage": 2, "offload_optimizer": {"device": null}},
  "train_batch_size": null
})");
  std::string warning;
  const nlohmann::json j = import_deepspeed(file, llama(), &warning);
  EXPECT_EQ(j["strategy"]["sharding"], "zero2");  // the last stage applies
  EXPECT_EQ(j["strategy"]["offload_optimizer"], "none");
  EXPECT_EQ(warning, file +
                         ": zero_optimization.stage written twice (3:25 and 3:37; the last "
                         "applies); train_batch_size is null (read as absent); "
                         "zero_optimization.offload_optimizer.device is null (read as absent)");
  // A clean file: no warning.
  const std::string clean = dir.write("clean.json", R"({"zero_optimization": {"stage": 2}})");
  import_deepspeed(clean, llama(), &warning);
  EXPECT_EQ(warning, "");
}

TEST(ImportDeepSpeed, WorldSizeFromTrainBatch) {
  const test::TempDir dir("ds-world");
  const std::string file = dir.write("ds.json", R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 8,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
  const Scenario s = parse_scenario(import_deepspeed(file, llama()));
  EXPECT_EQ(s.strategy.dp, 4);
  EXPECT_EQ(s.cluster.gpus_per_node, 4);
  EXPECT_EQ(s.strategy.sharding, Sharding::zero1);
  EXPECT_EQ(s.strategy.precision, Precision::bf16);
  EXPECT_EQ(s.training.global_batch, 64);
}

TEST(ImportDeepSpeed, AccumulationFromTrainBatch) {
  const test::TempDir dir("ds-accum");
  const std::string file = dir.write("ds.json", R"({
    "train_batch_size": 256, "train_micro_batch_size_per_gpu": 4,
    "zero_optimization": {"stage": 3}})");
  ImportOptions o = llama();
  o.num_processes = 16;
  o.num_machines = 2;
  const Scenario s = parse_scenario(import_deepspeed(file, o));
  EXPECT_EQ(s.strategy.grad_accum, 4);
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.strategy.precision, Precision::no);
}

TEST(ImportDeepSpeed, Errors) {
  const test::TempDir dir("ds-errors");
  auto check = [&](const std::string& text, const std::string& path_part, const std::string& part,
                   ImportOptions o = llama()) {
    const std::string file = dir.write("e.json", text);
    const Caught c = error_of([&] { import_deepspeed(file, o); });
    expect_has(c.path, path_part);
    expect_has(c.what, part);
    EXPECT_EQ(c.what.find('\n'), std::string::npos);
  };
  check(R"({"zero_optimization": {"stage": 5}})", "zero_optimization.stage",
        "must be in [0, 3], got 5");
  check(R"({"zero_optimization": {"stage": "two"}})", "zero_optimization.stage",
        "expected an integer or \"auto\"");
  check(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})", "bf16.enabled",
        "fp16 and bf16 are both enabled");
  check(R"({"fp16": {"enabled": true, "loss_scale": 128}})", "fp16.loss_scale",
        "static loss scaling (128) is not modelled; valid: 0 (dynamic scaling)");
  check(R"({"optimizer": {"type": "Lamb"}})", "optimizer.type", "valid: Adam, AdamW, SGD");
  check(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})",
        "zero_optimization.offload_optimizer.device", "valid: none, cpu");
  check(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 8})",
        "train_batch_size", "100 is not a multiple of train_micro_batch_size_per_gpu");
  ImportOptions eight = llama();
  eight.num_processes = 8;
  check(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 8})",
        "train_batch_size",
        "100 ≠ train_micro_batch_size_per_gpu × gradient_accumulation_steps "
        "× GPUs = 4 × 8 × 8 = 256",
        eight);
  check("{\"zero_optimization\": {\"stage\": 2,}}", "e.json:1:", "invalid JSON");
  check("[1, 2]", "e.json", "expected a JSON object");
  check(R"({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})", "e.json",
        "the imported scenario is invalid: strategy.offload_optimizer");
}

}  // namespace
}  // namespace stratagem::scenario
