#pragma once
// Builders of small results for the viewer tests, and a runner for the viewer executable.
#include <string>

#include "engine/result/result.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::test {

result::Span make_span(result::SpanKind kind, plan::Stream stream, double start_s, double end_s,
                       plan::OpId op = 0, int microbatch = -1);

/// gpt2-xl on one 4-GPU node, pp = 4, GPipe, 8 micro-batches of 2; `memory_gib` > 0
/// replaces the GPU's memory.
scenario::Scenario gpipe4_scenario(double memory_gib = 0);

/// A 4-layer GPT (h 2048, 16 heads) on one A100 node of dp × tp × pp GPUs, 1F1B with
/// 4 micro-batches of 1 sequence of 1024, bf16; sequence parallelism when asked (tp > 1).
scenario::Scenario tp_scenario(int dp, int tp, int pp, bool sequence_parallel = false);
/// Simulates `s` with every rank built (no folding).
result::RunResult simulate_unfolded(const scenario::Scenario& s);

struct Command {
  int exit_code = -1;
  std::string out;  ///< stdout and stderr together
};
/// Runs a shell command line.
Command run_command(const std::string& command);
bool have_xvfb();
/// A fresh temporary directory for one test.
std::string fresh_dir(const std::string& name);

}  // namespace stratagem::test
