// Every kind of config `accelerate config` writes (tests/scenario/accelerate_configs/, shaped as
// accelerate's config writer and its own test configs write them) imports into the strategy it
// asks for and launches, with the keys Stratagem cannot honour, and keys accelerate does not
// know, named in one warning line; contradictions stay one located error.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/scenario.hpp"
#include "tests/scenario/import_test_util.hpp"
#include "tests/scenario/temp_files.hpp"

namespace stratagem::scenario {
namespace {

std::string config(const std::string& name) {
  return std::string(STRATAGEM_SOURCE_DIR) + "/tests/scenario/accelerate_configs/" + name;
}

/// The warning line for `file`: "<file>: <rest>".
std::string line(const std::string& file, const std::string& rest) {
  return file + ": " + rest;
}

struct Import {
  nlohmann::json scenario;
  std::string warning = "(not set)";
};

Import imported(const std::string& file, const ImportOptions& o = llama()) {
  Import r;
  r.scenario = import_accelerate(file, o, &r.warning);
  EXPECT_NO_THROW(parse_scenario(r.scenario));
  return r;
}

/// The strategy build_scenario writes for a data-parallel run with these values, before the
/// test's own changes.
nlohmann::json strategy(int dp, const std::string& sharding, const std::string& precision) {
  return {{"dp", dp},
          {"pp", 1},
          {"micro_batch_size", 1},
          {"grad_accum", 1},
          {"sharding", sharding},
          {"mixed_precision", precision},
          {"recompute", "none"},
          {"offload_optimizer", "none"}};
}

nlohmann::json cluster(const std::string& preset, int nodes, int gpus_per_node) {
  return {{"preset", preset}, {"nodes", nodes}, {"gpus_per_node", gpus_per_node}};
}

/// A launch config as `read_accelerate_launch_config` returns it for a one-machine file.
AccelerateLaunchConfig one_machine(int processes) {
  AccelerateLaunchConfig c;
  c.num_processes = processes;
  c.num_machines = 1;
  c.machine_rank = 0;
  return c;
}

void expect_launch(const std::string& file, const AccelerateLaunchConfig& want) {
  SCOPED_TRACE(file);
  const AccelerateLaunchConfig got = read_accelerate_launch_config(file);
  EXPECT_EQ(got.num_processes, want.num_processes);
  EXPECT_EQ(got.num_machines, want.num_machines);
  EXPECT_EQ(got.machine_rank, want.machine_rank);
  EXPECT_EQ(got.main_process_ip, want.main_process_ip);
  EXPECT_EQ(got.main_process_port, want.main_process_port);
  EXPECT_EQ(got.cpu, want.cpu);
  EXPECT_EQ(got.sharding, want.sharding);
  EXPECT_EQ(got.mixed_precision, want.mixed_precision);
  EXPECT_EQ(got.grad_accum, want.grad_accum);
  EXPECT_EQ(got.fsdp_wrap_cls, want.fsdp_wrap_cls);
  EXPECT_EQ(got.fsdp_min_num_params, want.fsdp_min_num_params);
  EXPECT_EQ(got.warning, want.warning);
}

// ---- no sharding -------------------------------------------------------------------------

TEST(AccelerateConfigs, MultiCpu) {
  const std::string file = config("multi_cpu.yaml");
  ImportOptions o;
  o.model = "gpt2";
  o.seq_len = 128;
  const Import r = imported(file, o);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("laptop-cpu", 1, 2));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(2, "none", "no"));
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 2);
  AccelerateLaunchConfig want = one_machine(2);
  want.cpu = true;
  expect_launch(file, want);

  // mpirun on four machines: mpirun_config and the addresses are launcher plumbing.
  AccelerateLaunchConfig four;
  four.num_processes = 16;
  four.num_machines = 4;
  four.machine_rank = 0;
  four.main_process_ip = "127.0.0.1";
  four.main_process_port = 29500;
  four.cpu = true;
  expect_launch(config("multi_cpu_mpirun_4_machines.yaml"), four);
}

TEST(AccelerateConfigs, MultiGpuNamesDynamoAndCpuAffinity) {
  const std::string file = config("multi_gpu_dynamo.yaml");
  const std::string warning = line(file, "not honoured: dynamo_config, enable_cpu_affinity");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, warning);
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(8, "none", "bf16"));
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 8);
  AccelerateLaunchConfig want = one_machine(8);
  want.mixed_precision = "bf16";
  want.warning = warning;
  expect_launch(file, want);
}

TEST(AccelerateConfigs, MultiGpuSecondOfTwoMachines) {
  // debug, gpu_ids, rdzv_backend c10d and same_network false: nothing to warn about.
  const std::string file = config("multi_gpu_2_machines.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 2, 8));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(16, "none", "bf16"));
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 16);
  AccelerateLaunchConfig want;
  want.num_processes = 16;
  want.num_machines = 2;
  want.machine_rank = 1;
  want.main_process_ip = "10.0.0.1";
  want.main_process_port = 29500;
  want.mixed_precision = "bf16";
  expect_launch(file, want);
}

TEST(AccelerateConfigs, NoIsOneProcess) {
  for (const char* name : {"no_single_gpu.yaml", "v0_11_no_with_empty_sections.yaml"}) {
    SCOPED_TRACE(name);
    const std::string file = config(name);
    const Import r = imported(file);
    EXPECT_EQ(r.warning, "");
    EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 1));
    EXPECT_EQ(r.scenario.at("strategy"), strategy(1, "none", "no"));
    EXPECT_EQ(r.scenario.at("training").at("global_batch"), 1);
    expect_launch(file, one_machine(1));
  }
}

TEST(AccelerateConfigs, Fp16) {
  const std::string file = config("multi_gpu_fp16.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 4));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(4, "none", "fp16"));
  EXPECT_EQ(parse_scenario(r.scenario).strategy.precision, Precision::fp16);
  AccelerateLaunchConfig want = one_machine(4);
  want.mixed_precision = "fp16";
  expect_launch(file, want);
}

TEST(AccelerateConfigs, Bf16FromAHandWrittenTemplate) {
  // Only distributed_type, mixed_precision and num_processes: the rest is accelerate's default.
  const std::string file = config("multi_gpu_bf16_template.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 2));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(2, "none", "bf16"));
  EXPECT_EQ(parse_scenario(r.scenario).strategy.precision, Precision::bf16);
  AccelerateLaunchConfig want;
  want.num_processes = 2;
  want.mixed_precision = "bf16";
  expect_launch(file, want);
}

TEST(AccelerateConfigs, Fp8WhereTheGpuHasItElseBf16) {
  const std::string file = config("multi_gpu_fp8.yaml");
  // The default cluster's A100 has no fp8: bf16, said so.
  const Import a100 = imported(file);
  EXPECT_EQ(a100.warning, line(file,
                               "not honoured: mixed_precision (fp8 as bf16: a100-80gb has "
                               "no fp8)"));
  EXPECT_EQ(a100.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 2));
  EXPECT_EQ(a100.scenario.at("strategy"), strategy(2, "none", "bf16"));
  // An H100 runs it.
  ImportOptions h100 = llama();
  h100.cluster = "dgx-h100";
  const Import hopper = imported(file, h100);
  EXPECT_EQ(hopper.warning, "");
  EXPECT_EQ(hopper.scenario.at("cluster"), cluster("dgx-h100", 1, 2));
  EXPECT_EQ(hopper.scenario.at("strategy"), strategy(2, "none", "fp8"));
  // --mixed_precision decides instead of the file.
  ImportOptions flag = llama();
  flag.mixed_precision = "fp16";
  const Import flagged = imported(file, flag);
  EXPECT_EQ(flagged.warning, "");
  EXPECT_EQ(flagged.scenario.at("strategy"), strategy(2, "none", "fp16"));
  // The Accelerator has no fp8.
  AccelerateLaunchConfig want = one_machine(2);
  want.mixed_precision = "bf16";
  want.warning = line(file, "not honoured: mixed_precision (fp8 runs as bf16)");
  expect_launch(file, want);
}

// ---- FSDP --------------------------------------------------------------------------------

TEST(AccelerateConfigs, FsdpTransformerBasedWrap) {
  const std::string file = config("fsdp_transformer_wrap.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, line(file, "not honoured: fsdp_config.fsdp_state_dict_type"));
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  nlohmann::json want_strategy = strategy(8, "SHARD_GRAD_OP", "bf16");
  want_strategy["recompute"] = "full";
  want_strategy["prefetch"] = 1;
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  // The Accelerator checkpoints no activations and prefetches no units.
  AccelerateLaunchConfig want = one_machine(8);
  want.sharding = "SHARD_GRAD_OP";
  want.mixed_precision = "bf16";
  want.fsdp_wrap_cls = {"LlamaDecoderLayer"};
  want.warning = line(file,
                      "not honoured: fsdp_config.fsdp_activation_checkpointing, "
                      "fsdp_config.fsdp_backward_prefetch, fsdp_config.fsdp_state_dict_type");
  expect_launch(file, want);
}

TEST(AccelerateConfigs, FsdpSizeBasedWrapWithOffload) {
  const std::string file = config("fsdp_size_wrap.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, line(file, "not honoured: fsdp_config.fsdp_state_dict_type"));
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 4));
  nlohmann::json want_strategy = strategy(4, "FULL_SHARD", "bf16");
  want_strategy["offload_optimizer"] = "cpu";
  want_strategy["prefetch"] = 1;
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  expect_has(r.scenario.at("description").get<std::string>(),
             "Note: fsdp_offload_params: true is modelled as the optimizer states and master "
             "weights on the CPU");
  AccelerateLaunchConfig want = one_machine(4);
  want.sharding = "FULL_SHARD";
  want.mixed_precision = "bf16";
  want.fsdp_min_num_params = 100000000;
  want.warning = line(file,
                      "not honoured: fsdp_config.fsdp_backward_prefetch, "
                      "fsdp_config.fsdp_forward_prefetch, fsdp_config.fsdp_offload_params, "
                      "fsdp_config.fsdp_state_dict_type");
  expect_launch(file, want);
}

TEST(AccelerateConfigs, FsdpNoWrapNoShard) {
  const std::string file = config("fsdp_no_wrap.yaml");
  const std::string warning = line(file, "not honoured: fsdp_config.fsdp_state_dict_type");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, warning);
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 2));
  nlohmann::json want_strategy = strategy(2, "none", "no");
  want_strategy["prefetch"] = 0;
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  // NO_WRAP: one unit (no classes, no size); NO_PREFETCH is what the Accelerator does.
  AccelerateLaunchConfig want = one_machine(2);
  want.warning = warning;
  expect_launch(file, want);
}

TEST(AccelerateConfigs, FsdpShardingStrategyAsTorchEnumNumber) {
  const std::string file = config("fsdp_integer_strategy.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, line(file, "not honoured: fsdp_config.fsdp_state_dict_type"));
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  nlohmann::json want_strategy = strategy(8, "FULL_SHARD", "fp16");
  want_strategy["prefetch"] = 1;
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  AccelerateLaunchConfig want = one_machine(8);
  want.sharding = "FULL_SHARD";
  want.mixed_precision = "fp16";
  want.fsdp_wrap_cls = {"GPT2Block"};
  want.warning = line(file,
                      "not honoured: fsdp_config.fsdp_backward_prefetch_policy, "
                      "fsdp_config.fsdp_state_dict_type");
  expect_launch(file, want);

  // Every number torch's ShardingStrategy has, on two machines (HYBRID_SHARD needs them).
  struct Case {
    int number;
    const char* imported;
    const char* launched;
    const char* import_warning;  // after "<file>: ", "" for none
    const char* launch_warning;
  };
  const char* zero2 =
      "not honoured: fsdp_config.fsdp_sharding_strategy (HYBRID_SHARD_ZERO2 as SHARD_GRAD_OP)";
  const Case cases[] = {
      {1, "FULL_SHARD", "FULL_SHARD", "", ""},
      {2, "SHARD_GRAD_OP", "SHARD_GRAD_OP", "", ""},
      {3, "none", "none", "", ""},
      {4, "HYBRID_SHARD", "FULL_SHARD", "",
       "not honoured: fsdp_config.fsdp_sharding_strategy (HYBRID_SHARD runs as FULL_SHARD)"},
      {5, "SHARD_GRAD_OP", "SHARD_GRAD_OP", zero2, zero2},
  };
  const test::TempDir dir("accelerate-fsdp-numbers");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.number);
    const std::string n = std::to_string(c.number);
    const std::string numbered = dir.write("strategy" + n + ".yaml",
                                           "distributed_type: FSDP\nfsdp_config:\n"
                                           "  fsdp_sharding_strategy: " +
                                               n + "\nnum_machines: 2\nnum_processes: 16\n");
    const auto warned = [&](const std::string& rest) {
      return rest.empty() ? std::string() : line(numbered, rest);
    };
    const Import i = imported(numbered);
    EXPECT_EQ(i.scenario.at("strategy").at("sharding"), c.imported);
    EXPECT_EQ(i.scenario.at("strategy").at("dp"), 16);
    EXPECT_EQ(i.warning, warned(c.import_warning));
    AccelerateLaunchConfig l;
    l.num_processes = 16;
    l.num_machines = 2;
    l.sharding = c.launched;
    l.warning = warned(c.launch_warning);
    expect_launch(numbered, l);
  }
}

TEST(AccelerateConfigs, Fsdp2ReshardAfterForward) {
  const std::string file = config("fsdp2.yaml");
  const std::string warning = line(file, "not honoured: fsdp_config.fsdp_state_dict_type");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, warning);  // parallelism_config: plain sharding over the 8 GPUs
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  EXPECT_EQ(r.scenario.at("strategy"), strategy(8, "SHARD_GRAD_OP", "bf16"));
  AccelerateLaunchConfig want = one_machine(8);
  want.sharding = "SHARD_GRAD_OP";
  want.mixed_precision = "bf16";
  want.fsdp_wrap_cls = {"LlamaDecoderLayer"};
  want.warning = warning;
  expect_launch(file, want);

  // A parallelism config with tensor parallelism asks for what FSDP here does not do.
  const test::TempDir dir("accelerate-fsdp2-mesh");
  const std::string mesh = dir.write("mesh.yaml", R"(distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
num_processes: 8
parallelism_config:
  parallelism_config_dp_shard_size: 4
  parallelism_config_tp_size: 2
)");
  const Import m = imported(mesh);
  EXPECT_EQ(m.warning, line(mesh, "not honoured: parallelism_config"));
  EXPECT_EQ(m.scenario.at("strategy"), strategy(8, "FULL_SHARD", "no"));
}

// ---- DeepSpeed ---------------------------------------------------------------------------

TEST(AccelerateConfigs, DeepSpeedZero1Inline) {
  const std::string file = config("deepspeed_zero1.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  nlohmann::json want_strategy = strategy(8, "zero1", "bf16");
  want_strategy["stack"] = "deepspeed";  // the DeepSpeed engine runs the model
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  AccelerateLaunchConfig want = one_machine(8);
  want.sharding = "zero1";
  want.mixed_precision = "bf16";
  want.grad_accum = 1;
  expect_launch(file, want);
}

TEST(AccelerateConfigs, DeepSpeedZero2InlineWithCpuOffload) {
  const std::string file = config("deepspeed_zero2.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, line(file, "not honoured: deepspeed_config.gradient_clipping"));
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 8));
  nlohmann::json want_strategy = strategy(8, "zero2", "fp16");
  want_strategy["stack"] = "deepspeed";
  want_strategy["grad_accum"] = 4;
  want_strategy["offload_optimizer"] = "cpu";
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 32);
  AccelerateLaunchConfig want = one_machine(8);
  want.sharding = "zero2";
  want.mixed_precision = "fp16";
  want.grad_accum = 4;
  want.warning = line(file,
                      "not honoured: deepspeed_config.gradient_clipping, "
                      "deepspeed_config.offload_optimizer_device");
  expect_launch(file, want);
}

TEST(AccelerateConfigs, DeepSpeedZero3InlineOnTwoMachines) {
  const std::string file = config("deepspeed_zero3_2_machines.yaml");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, line(file,
                            "not honoured: deepspeed_config.offload_optimizer_device (nvme as "
                            "cpu), deepspeed_config.offload_param_device, "
                            "deepspeed_config.zero3_save_16bit_model"));
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 2, 8));
  nlohmann::json want_strategy = strategy(16, "zero3", "bf16");
  want_strategy["stack"] = "deepspeed";
  want_strategy["grad_accum"] = 2;
  want_strategy["offload_optimizer"] = "cpu";
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 32);
  expect_has(r.scenario.at("description").get<std::string>(),
             "Note: offload_param_device: cpu is not modelled");
  // ZeRO-3 runs as FULL_SHARD, which shards the same states.
  AccelerateLaunchConfig want;
  want.num_processes = 16;
  want.num_machines = 2;
  want.machine_rank = 0;
  want.main_process_ip = "10.0.0.1";
  want.main_process_port = 29500;
  want.sharding = "FULL_SHARD";
  want.mixed_precision = "bf16";
  want.grad_accum = 2;
  want.warning = line(file,
                      "not honoured: deepspeed_config.offload_optimizer_device, "
                      "deepspeed_config.offload_param_device, "
                      "deepspeed_config.zero3_save_16bit_model, "
                      "deepspeed_config.zero_stage (zero3 runs as FULL_SHARD)");
  expect_launch(file, want);
}

TEST(AccelerateConfigs, DeepSpeedConfigFileWrittenByTheTest) {
  const test::TempDir dir("accelerate-ds-file");
  dir.write("ds_z3.json", R"({"zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu"}},
    "bf16": {"enabled": "auto"}, "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
  // As `accelerate config` writes it with a JSON file: no mixed_precision (the JSON's).
  const std::string file = dir.write("ds_file.yaml", R"(compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  deepspeed_config_file: ds_z3.json
  zero3_init_flag: true
distributed_type: DEEPSPEED
downcast_bf16: 'no'
enable_cpu_affinity: false
machine_rank: 0
main_training_function: main
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.scenario.at("cluster"), cluster("dgx-a100-80gb", 1, 4));
  nlohmann::json want_strategy = strategy(4, "zero3", "no");
  want_strategy["stack"] = "deepspeed";
  want_strategy["micro_batch_size"] = 2;
  want_strategy["grad_accum"] = 4;
  want_strategy["offload_optimizer"] = "cpu";
  EXPECT_EQ(r.scenario.at("strategy"), want_strategy);
  EXPECT_EQ(r.scenario.at("training").at("global_batch"), 2 * 4 * 4);
  AccelerateLaunchConfig want = one_machine(4);
  want.sharding = "FULL_SHARD";
  want.grad_accum = 4;
  want.warning = line(file,
                      "not honoured: deepspeed_config.deepspeed_config_file (zero3 runs as "
                      "FULL_SHARD), deepspeed_config.deepspeed_config_file "
                      "(zero_optimization.offload_optimizer)");
  expect_launch(file, want);

  // Inline keys next to the file are the file's to decide, and named; "auto" precision is
  // accelerate's mixed_precision.
  const std::string inline_too = dir.write("inline.yaml", R"(deepspeed_config:
  deepspeed_config_file: ds_z3.json
  zero_stage: 2
distributed_type: DEEPSPEED
mixed_precision: bf16
num_processes: 4
)");
  const Import both = imported(inline_too);
  EXPECT_EQ(both.warning,
            line(inline_too,
                 "not honoured: deepspeed_config.zero_stage (the deepspeed_config_file applies)"));
  EXPECT_EQ(both.scenario.at("strategy").at("sharding"), "zero3");
  EXPECT_EQ(both.scenario.at("strategy").at("mixed_precision"), "bf16");

  // A JSON that enables fp16 outranks accelerate's bf16, which is named.
  dir.write("ds_fp16.json", R"({"zero_optimization": {"stage": 2}, "fp16": {"enabled": true}})");
  const std::string fp16 = dir.write("fp16.yaml", R"(deepspeed_config:
  deepspeed_config_file: ds_fp16.json
distributed_type: DEEPSPEED
mixed_precision: bf16
num_processes: 4
)");
  const Import f = imported(fp16);
  EXPECT_EQ(f.warning,
            line(fp16, "not honoured: mixed_precision (the deepspeed_config_file's fp16 applies)"));
  EXPECT_EQ(f.scenario.at("strategy").at("mixed_precision"), "fp16");
  EXPECT_EQ(f.scenario.at("strategy").at("sharding"), "zero2");
}

// ---- what is named, what is an error ------------------------------------------------------

TEST(AccelerateConfigs, UnknownKeysAreNamedNotDropped) {
  const test::TempDir dir("accelerate-unknown-keys");
  // Typos at the top and in the FSDP section; the DeepSpeed section is not read with FSDP
  // (accelerate ignores it too), so its typo is not looked at.
  const std::string file = dir.write("typos.yaml", R"(deepspeed_config:
  zero_stag: 3
distributed_type: FSDP
fsdp_config:
  fsdp_sharding_stratgy: SHARD_GRAD_OP
  fsdp_state_dict_type: FULL_STATE_DICT
mixed_precison: bf16
num_processes: 8
tpu_use_sudo: true
)");
  const std::string warning = line(file,
                                   "not honoured: fsdp_config.fsdp_state_dict_type, tpu_use_sudo; "
                                   "unknown keys, ignored: fsdp_config.fsdp_sharding_stratgy, "
                                   "mixed_precison");
  const Import r = imported(file);
  EXPECT_EQ(r.warning, warning);
  EXPECT_EQ(r.scenario.at("strategy"), strategy(8, "FULL_SHARD", "no"));
  AccelerateLaunchConfig want;
  want.num_processes = 8;
  want.sharding = "FULL_SHARD";
  want.warning = warning;
  expect_launch(file, want);

  const std::string only = dir.write("only.yaml",
                                     "distributed_type: MULTI_GPU\nfoo: 1\n"
                                     "num_processes: 2\n");
  EXPECT_EQ(imported(only).warning, line(only, "unknown keys, ignored: foo"));

  // The shipped Megatron-LM example: gradient clipping is the one thing not modelled.
  const std::string megatron =
      std::string(STRATAGEM_SOURCE_DIR) + "/tests/scenario/megatron_lm_tp2_pp2.yaml";
  EXPECT_EQ(imported(megatron).scenario["strategy"]["stack"], "megatron");
  EXPECT_EQ(imported(megatron).warning,
            line(megatron, "not honoured: megatron_lm_config.megatron_lm_gradient_clipping"));
}

TEST(AccelerateConfigs, ContradictionsStayOneLocatedError) {
  const test::TempDir dir("accelerate-contradictions");
  auto check = [&](const std::string& name, const std::string& text, const std::string& path,
                   const std::string& part) {
    SCOPED_TRACE(name);
    const std::string file = dir.write(name, text);
    for (const bool launch : {false, true}) {
      const Caught c = error_of([&] {
        if (launch) {
          read_accelerate_launch_config(file);
        } else {
          import_accelerate(file, llama());
        }
      });
      EXPECT_EQ(c.path, file + ":" + path);
      expect_has(c.what, part);
      EXPECT_EQ(c.what.find('\n'), std::string::npos);
    }
  };
  // FSDP1's two spellings of the strategy, disagreeing.
  check("two.yaml",
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
        "  fsdp_sharding_strategy: FULL_SHARD\nnum_processes: 8\n",
        "3:31: fsdp_config.fsdp_reshard_after_forward",
        "'SHARD_GRAD_OP' disagrees with fsdp_sharding_strategy 'FULL_SHARD'; keep one");
  // FSDP2 reshards or not; a FSDP1 strategy name there is a mistake.
  check("fsdp2.yaml",
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: FULL_SHARD\n"
        "  fsdp_version: 2\n",
        "3:31: fsdp_config.fsdp_reshard_after_forward", "expected true or false, got 'FULL_SHARD'");
  check("offload.yaml",
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  offload_optimizer_device: nvmee\n",
        "3:29: deepspeed_config.offload_optimizer_device",
        "unknown value 'nvmee' (did you mean 'nvme'?); valid: none, cpu, nvme");
  check("precision.yaml", "distributed_type: MULTI_GPU\nmixed_precision: fp9\n",
        "2:18: mixed_precision", "valid: no, fp16, bf16, fp8");
  check("wrap.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: SIZE_BASED\n",
        "3:26: fsdp_config.fsdp_auto_wrap_policy",
        "unknown value 'SIZE_BASED' (did you mean 'SIZE_BASED_WRAP'?); valid: "
        "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP");
}

}  // namespace
}  // namespace stratagem::scenario
