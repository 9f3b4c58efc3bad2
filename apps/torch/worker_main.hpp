#pragma once
// A worker process of a real run (`stratagem worker`): reads where it sits in the job from
// the launcher's environment (torchrun, Slurm, mpirun or `stratagem run`), meets the others
// through the store, picks its device and communicator (a CUDA device and NCCL when there is
// one, else the CPU and Gloo), trains, and has rank 0 print progress and write the RunResult
// ("executor": "real") with every rank's trace of the last step.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/scenario/scenario.hpp"

namespace stratagem::runtime {

struct WorkerArgs {
  std::string scenario;
  int steps = 0;                ///< 0: the scenario's training.steps
  bool cpu = false;             ///< CPU and Gloo even when a GPU is there
  std::string mixed_precision;  ///< "no" | "fp16" | "bf16"; empty: the scenario's
  std::string data;             ///< byte-level text file; empty: synthetic
  std::optional<std::uint64_t> seed;
  std::string save_dir;
  int save_every = 0;
  std::string resume;
  double timeout_s = 300;  ///< no progress for this long ends the job, naming who hangs
  std::string output;      ///< RunResult JSON (written by rank 0)
  double lr = 1e-3;
  int log_every = 1;                        ///< progress line every N steps (rank 0)
  /// Before training, time the model's units on every process (measure_units_on_all_ranks)
  /// and record them in the result's scenario (cluster.gpu.measured_units).
  bool measure_units = false;
  std::int64_t kill_during_save_step = -1;  ///< fault injection for tests (hidden flag)
  int kill_during_save_rank = 0;
  std::int64_t stall_at_step = -1;  ///< fault injection for tests (hidden flag)
  int stall_rank = 0;
};

/// The scenario as this job runs it: `args` applied (precision, seed, steps); on the CPU the
/// cluster becomes `nodes` × `processes_per_node` CPU "devices". With `measure_device` their
/// speed is measured here (sustained fp32/bf16 matmul rate and copy bandwidth of this
/// process's share of the machine), so MFU is relative to what this machine can do; without,
/// the scenario's GPU description stays (enough to check the job's shape before starting it).
scenario::Scenario job_scenario(const WorkerArgs& args, bool on_cpu, int nodes,
                                int processes_per_node, bool measure_device);

/// Runs this process's rank to the end; returns the exit code (errors are thrown).
int run_worker(const WorkerArgs& args);

/// "【train】 epoch：1/1 step：3/50 loss：3.912345 samples/s：812.3 tokens/s：12996.8"
std::string progress_line(std::int64_t step, std::int64_t steps, double loss, double samples_per_s,
                          double tokens_per_s);

}  // namespace stratagem::runtime
