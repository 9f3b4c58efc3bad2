#pragma once
// Checkpoints of a real run, one directory per saved step:
//   DIR/step-<S>/rank-<r>.ckpt   each rank's shard: its parameters (full or the shard it
//                                owns), optimizer states, fp32 master weights, loss scaler,
//                                optimizer step count, CPU RNG state, and the data position
//   DIR/step-<S>/manifest.json   written last: the step, world size, the scenario's
//                                fingerprint, and every rank file's size and checksum
// A rank writes its file under a temporary name, flushes it to disk and renames it; after a
// barrier the first rank of each node writes the manifest the same way. A checkpoint is
// complete exactly when its manifest exists, so a process killed while saving leaves the
// previous complete checkpoint as the one a resume uses. Older checkpoints are kept.
//
// A step-S checkpoint holds the state after S optimizer steps; resuming runs step S next and,
// since data is a function of the step (data.hpp), continues the same loss trajectory.
#include <cstdint>
#include <string>

#include "engine/comm/communicator.hpp"
#include "engine/runtime/executor.hpp"

namespace stratagem::runtime {

struct SaveOptions {
  /// Fault injection (tests): SIGKILL this process once its temporary file is written.
  bool kill_after_temp_file = false;
};

/// Writes the step-`step` checkpoint of every rank (collective: all ranks call it).
void save_checkpoint(const std::string& dir, std::int64_t step, Executor& executor,
                     comm::Communicator& comm, const SaveOptions& options = {});

/// Loads the newest complete checkpoint in `dir` into `executor` and returns its step (the
/// next step to run). Collective. One that any rank finds damaged (a rank file failing its
/// length or checksum check, a manifest that does not parse) is skipped with a warning naming
/// the rank and file, for the next older complete one. Throws SpecError (path "--resume") when
/// there is none, or when it was written for another scenario, strategy or world size;
/// RuntimeError when every complete checkpoint is damaged.
std::int64_t load_checkpoint(const std::string& dir, Executor& executor, comm::Communicator& comm);

/// The newest step in `dir` with a complete checkpoint (a manifest), or −1.
std::int64_t latest_complete_step(const std::string& dir);

/// What a checkpoint must match to be resumed: the scenario without its name and step count.
std::string scenario_fingerprint(const scenario::Scenario& scenario);

}  // namespace stratagem::runtime
