#pragma once
// The crash-safe file format both kinds of checkpoint share (the plan executor's, checkpoint.hpp,
// and the Accelerator's save_state): each rank writes one file under a temporary name, flushes
// it to disk and renames it; after every rank's file is in place (a collective), one writer
// per node writes manifest.json the same way. A checkpoint is complete exactly when its
// manifest exists.
//
// Rank file: "STRATAGEM-CKPT\n", the header length (8 bytes, little-endian), the header (JSON:
// whatever the caller puts in, plus "tensors" [{name, dtype, numel, offset, bytes}] and the
// payload's "checksum"), then the payload (the tensors' bytes, CPU, contiguous).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>
#include <nlohmann/json.hpp>

#include "engine/comm/communicator.hpp"

namespace stratagem::runtime::ckpt {

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ULL);
std::string hex(std::uint64_t v);

/// Writes `bytes` to `path` via `path`.tmp, fsync and rename (and fsyncs the directory).
/// `kill_before_rename` (fault injection for tests) SIGKILLs this process once the temporary
/// file is on disk. Throws RuntimeError naming the file.
void write_atomically(const std::string& path, const std::string& bytes,
                      bool kill_before_rename = false);
/// The whole file; RuntimeError when it cannot be read.
std::string read_file(const std::string& path);

/// A rank file's bytes: `header` plus the tensors (moved to the CPU). Sets `checksum`.
std::string encode_rank_file(nlohmann::json header,
                             const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             std::uint64_t* checksum);

struct RankFile {
  std::string path;
  nlohmann::json header;
  std::string payload;
  /// The entry named `name`, or nullptr.
  const nlohmann::json* find(const std::string& name) const;
  /// Copies entry `name` into `into` (same dtype and size, else RuntimeError naming both).
  void copy_into(const std::string& name, const at::Tensor& into) const;
  /// Entry `name` as a new CPU tensor of `dtype`.
  at::Tensor tensor(const std::string& name, at::ScalarType dtype) const;
};
/// Reads and verifies a rank file (magic, length, checksum); RuntimeError when damaged.
RankFile parse_rank_file(const std::string& path);

/// Collective: after this rank wrote its file (`bytes` long, `checksum`), gathers every rank's
/// size and checksum and, on `writer` ranks, writes DIR/manifest.json holding `manifest` plus
/// "ranks": [{file, bytes, checksum}]. Ends with a barrier. `device`: where the communicator
/// takes tensors.
void write_manifest(comm::Communicator& comm, const std::string& dir,
                    const std::string& rank_file_name, std::size_t bytes, std::uint64_t checksum,
                    bool writer, nlohmann::json manifest, const c10::Device& device);

/// A complete checkpoint chosen to resume from, its manifest parsed and this rank's file
/// verified.
struct Chosen {
  std::int64_t step = -1;
  std::string dir;  ///< DIR/<prefix><step>
  nlohmann::json manifest;
  RankFile file;
};
/// Collective: the newest complete DIR/<prefix><N> whose manifest parses and whose rank files
/// pass their checks on every rank (each reads `rank_file_name`, e.g. "rank-3.ckpt"); a damaged
/// one is skipped with "warning: rank R: skipping checkpoint …" on the rank that found it, and
/// all ranks decide each candidate together. nullopt when there is no complete checkpoint;
/// RuntimeError when the ranks see different checkpoints, or when every one is damaged.
std::optional<Chosen> choose_newest_sound(comm::Communicator& comm, const std::string& dir,
                                          const std::string& prefix,
                                          const std::string& rank_file_name,
                                          const c10::Device& device);

/// The newest DIR/<prefix><N> with a manifest.json, or −1.
std::int64_t latest_complete(const std::string& dir, const std::string& prefix);
/// Every N of DIR/<prefix><N> with a manifest.json, newest first.
std::vector<std::int64_t> complete_steps(const std::string& dir, const std::string& prefix);

}  // namespace stratagem::runtime::ckpt
