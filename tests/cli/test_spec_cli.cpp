// The spec-facing commands through the real binary: `info`, `presets`, `import`, and bad input
// (one line on stderr naming where, exit code 2, never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.hpp"

namespace stratagem::test {
namespace {

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// A bad-input failure: exit 2, nothing on stdout, exactly one line on stderr holding `part`.
void expect_input_error(const CliResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  expect_has(r.err, part);
}

const char* kBase = R"({
  "model": "gpt2",
  "cluster": "dgx-a100-80gb",
  "strategy": {"dp": 8, "micro_batch_size": 2, "grad_accum": 4, "mixed_precision": "bf16"},
  "training": {"seq_len": 1024, "global_batch": 64}
})";

// kBase with `from` replaced by `to` (once).
std::string edited(const std::string& from, const std::string& to) {
  std::string text = kBase;
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(SpecCli, InfoReportsFormulasAndNumbers) {
  const CliResult r = run_cli("info default");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_has(r.out, "total          1,557,611,200");
  expect_has(r.out, "per block         30,740,800  x 48 layers");
  expect_has(r.out, "6·N_matmul + 12·l·h·s");
  expect_has(r.out, "34·s·b·h + 4·a·s·b (flash attention");
  expect_has(r.out, "223,232,000 bytes");  // 34·1024·4·1600 + 4·25·1024·4
  expect_has(r.out, "recompute none, flash attention");
}

TEST(SpecCli, InfoJsonKeepsItsKeys) {
  const CliResult r = run_cli("info zero3-llama2-13b-full-recompute-8xa100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["params"].get<double>(), 13'015'864'320.0);
  // Full recomputation keeps the layer input only: 2·s·b·h bytes at 16 bits.
  EXPECT_EQ(j["activation_bytes_per_layer"].get<double>(), 2.0 * 2048 * 4 * 5120);
  // 6·N_matmul + 12·l·h·s with N_matmul = 40·(4h² + 3·h·f) + V·h.
  const double h = 5120, f = 13824, l = 40, v = 32000, s = 2048;
  EXPECT_EQ(j["flops_per_token"].get<double>(),
            6.0 * (l * (4 * h * h + 3 * h * f) + v * h) + 12.0 * l * h * s);
  EXPECT_EQ(j["recompute"], "full");
  EXPECT_EQ(j["params_breakdown"]["per_block"].get<double>(), 4 * h * h + 3 * h * f + 2 * h);
}

TEST(SpecCli, PresetsListsKeyFigures) {
  const CliResult models = run_cli("presets models");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  expect_has(models.out, "llama2-7b");
  expect_has(models.out, "6738415616");
  const CliResult gpus = run_cli("presets gpus");
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  expect_has(gpus.out, "h100-80gb");
  expect_has(gpus.out, "989.4");
  const CliResult clusters = run_cli("presets clusters");
  ASSERT_EQ(clusters.exit_code, 0) << clusters.err;
  expect_has(clusters.out, "dgx-h100");
  expect_has(clusters.out, "laptop-cpu");
  const CliResult one = run_cli("presets models bert-base");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["total_params"].get<double>(), 109'482'240.0);
  expect_input_error(run_cli("presets models gpt4"), "unknown model preset 'gpt4'");
  expect_input_error(run_cli("presets widgets"), "valid: models, gpus, clusters");
}

TEST(SpecCli, ImportAccelerateRoundTrip) {
  const std::string dir = temp_dir("spec-import");
  write_file(dir + "/fsdp.yaml", R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
)");
  const CliResult printed = run_cli("import --accelerate " + dir + "/fsdp.yaml --model llama2-7b");
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  const auto j = nlohmann::json::parse(printed.out);
  EXPECT_EQ(j["strategy"]["sharding"], "FULL_SHARD");
  EXPECT_EQ(j["cluster"]["preset"], "dgx-a100-80gb");

  const CliResult written = run_cli("import --accelerate " + dir +
                                    "/fsdp.yaml --model llama2-7b "
                                    "--seq_len 4096 --micro_batch_size 2 -o " +
                                    dir + "/out.json");
  ASSERT_EQ(written.exit_code, 0) << written.err;
  expect_has(written.out, "wrote " + dir + "/out.json");
  const CliResult info = run_cli("info " + dir + "/out.json --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["seq_len"], 4096);
}

TEST(SpecCli, ImportDeepSpeed) {
  const std::string dir = temp_dir("spec-import-ds");
  write_file(dir + "/ds.json", R"({"zero_optimization": {"stage": 3},
    "bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 4})");
  const CliResult r = run_cli("import --deepspeed " + dir +
                              "/ds.json --model llama2-13b "
                              "--cluster dgx-h100 --num_processes 16 --num_machines 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"]["sharding"], "zero3");
  EXPECT_EQ(j["cluster"]["nodes"], 2);
  EXPECT_EQ(j["training"]["global_batch"], 64);
}

TEST(SpecCli, BadScenariosExitTwoWithOneLine) {
  const std::string dir = temp_dir("spec-bad");
  auto run_with = [&](const std::string& text) {
    write_file(dir + "/s.json", text);
    return run_cli("info " + dir + "/s.json");
  };
  expect_input_error(run_with("{\n  \"model\": \"gpt2\"\n  \"cluster\": 1\n}"),
                     dir + "/s.json:3:3: invalid JSON");
  expect_input_error(run_with(edited("\"dp\": 8", "\"dpp\": 8")),
                     "strategy.dpp: unknown key (did you mean 'dp'?)");
  expect_input_error(run_with(edited("\"gpt2\"", "\"gpt5\"")),
                     "model: unknown model preset 'gpt5' (did you mean 'gpt2'?); valid: bert-base");
  expect_input_error(run_with(edited("\"dp\": 8", "\"dp\": \"8\"")),
                     "strategy.dp: expected an integer, got string");
  expect_input_error(run_with(edited("\"dp\": 8", "\"dp\": -8")),
                     "strategy.dp: must be in [1, 16777216], got -8");
  expect_input_error(run_with(edited("\"dp\": 8", "\"dp\": 4")),
                     "strategy.dp: dp × pp = 4 × 1 = 4, but the cluster has 8 GPUs");
  expect_input_error(run_with(R"({"model": "gpt2",
    "cluster": {"preset": "dgx-a100-80gb", "nodes": 2},
    "strategy": {"dp": 1, "pp": 16}})"),
                     "strategy.pp: pp = 16 exceeds the model's 12 layers");
  expect_input_error(run_with(edited("\"dp\": 8,",
                                     "\"dp\": 2, \"pp\": 4, \"schedule\": "
                                     "\"interleaved\", \"chunks\": 2,")),
                     "strategy.chunks: chunks = 2 must divide the layers per stage");
  expect_input_error(run_with(edited("\"global_batch\": 64", "\"global_batch\": 65")),
                     "training.global_batch: 65 ≠ micro_batch_size × grad_accum × dp");
  expect_input_error(run_with(edited("\"mixed_precision\": \"bf16\"",
                                     "\"mixed_precision\": \"bf16\", \"hysteresis\": 2")),
                     "strategy.hysteresis: loss scaling applies to fp16 only");
  expect_input_error(run_cli("info " + dir + "/missing.json"), dir + "/missing.json: no such file");
  expect_input_error(run_cli("info no-such-scenario"), "no such file or shipped scenario");
}

TEST(SpecCli, BadImportsExitTwoWithOneLine) {
  const std::string dir = temp_dir("spec-bad-import");
  write_file(dir + "/bad.yaml", "distributed_type: FSDP\nfsdp_config:\n  - [unclosed\n");
  const CliResult yaml = run_cli("import --accelerate " + dir + "/bad.yaml");
  expect_input_error(yaml, dir + "/bad.yaml:");
  expect_has(yaml.err, "invalid YAML");
  write_file(dir + "/value.yaml",
             "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 7\n");
  expect_input_error(run_cli("import --accelerate " + dir + "/value.yaml"),
                     "deepspeed_config.zero_stage: must be in [0, 3], got 7");
  expect_input_error(run_cli("import --accelerate " + dir + "/none.yaml"),
                     dir + "/none.yaml: cannot open file");
  write_file(dir + "/ok.yaml", "distributed_type: MULTI_GPU\nnum_processes: 8\n");
  expect_input_error(run_cli("import --accelerate " + dir + "/ok.yaml --model llama9"),
                     "--model: unknown model preset 'llama9'");
  expect_input_error(run_cli("import --accelerate " + dir + "/ok.yaml --cluster dgx-z100"),
                     "--cluster: unknown cluster preset 'dgx-z100'");
  write_file(dir + "/ds.json", "{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}");
  expect_input_error(run_cli("import --deepspeed " + dir + "/ds.json"),
                     "bf16.enabled: fp16 and bf16 are both enabled");
}

}  // namespace
}  // namespace stratagem::test
