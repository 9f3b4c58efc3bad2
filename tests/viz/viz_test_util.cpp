#include "tests/viz/viz_test_util.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>

#include "sim/simulate.hpp"

namespace stratagem::test {

result::Span make_span(result::SpanKind kind, plan::Stream stream, double start_s, double end_s,
                       plan::OpId op, int microbatch) {
  result::Span s;
  s.kind = kind;
  s.stream = stream;
  s.start_s = start_s;
  s.end_s = end_s;
  s.op = op;
  s.microbatch = microbatch;
  return s;
}

scenario::Scenario gpipe4_scenario(double memory_gib) {
  nlohmann::json gpu = "a100-80gb";
  if (memory_gib > 0) gpu = {{"preset", "a100-80gb"}, {"memory_GiB", memory_gib}};
  const nlohmann::json j = {
      {"name", "gpt2-xl, 4-stage GPipe"},
      {"model", {{"preset", "gpt2-xl"}}},
      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}, {"gpus_per_node", 4}, {"gpu", gpu}}},
      {"strategy",
       {{"dp", 1},
        {"pp", 4},
        {"schedule", "gpipe"},
        {"micro_batch_size", 2},
        {"grad_accum", 8},
        {"sharding", "none"},
        {"mixed_precision", "bf16"}}},
      {"training", {{"seq_len", 1024}, {"global_batch", 16}}}};
  return scenario::parse_scenario(j);
}

scenario::Scenario tp_scenario(int dp, int tp, int pp, bool sequence_parallel) {
  nlohmann::json strategy = {{"dp", dp},
                             {"tp", tp},
                             {"pp", pp},
                             {"micro_batch_size", 1},
                             {"grad_accum", 4},
                             {"sharding", "none"},
                             {"mixed_precision", "bf16"}};
  if (pp > 1) strategy["schedule"] = "1f1b";
  if (sequence_parallel) strategy["sequence_parallel"] = true;
  const nlohmann::json j = {{"name", "tiny gpt, dp " + std::to_string(dp) + " tp " +
                                         std::to_string(tp) + " pp " + std::to_string(pp)},
                            {"model",
                             {{"name", "gpt-4l"},
                              {"layers", 4},
                              {"hidden", 2048},
                              {"heads", 16},
                              {"ffn_hidden", 8192},
                              {"vocab", 32000},
                              {"max_positions", 1024}}},
                            {"cluster",
                             {{"preset", "dgx-a100-80gb"},
                              {"nodes", 1},
                              {"gpus_per_node", dp * tp * pp},
                              {"gpu", "a100-80gb"}}},
                            {"strategy", strategy},
                            {"training", {{"seq_len", 1024}, {"global_batch", 4 * dp}}}};
  return scenario::parse_scenario(j);
}

result::RunResult simulate_unfolded(const scenario::Scenario& s) {
  return sim::simulate(s, {.build = {.fold = false}, .cost = {}});
}

Command run_command(const std::string& command) {
  Command r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool have_xvfb() {
  return std::system("command -v xvfb-run >/dev/null 2>&1") == 0;
}

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("stratagem-viz-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace stratagem::test
