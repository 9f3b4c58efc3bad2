#pragma once
// Training data for the real runtime: every sample is a pure function of (seed, sample
// index), so a step's global batch is the same samples however it is split over
// data-parallel ranks, pipeline micro-batches and accumulation steps, and resuming needs
// nothing but the step number.
//
// Sample mapping (DistributedSampler with contiguous shards): in step t, data-parallel rank d
// takes micro-batch j's i-th row from global sample
//     t·global_batch + d·(micro_batch_size·grad_accum) + j·micro_batch_size + i.
// A single process with grad_accum' = dp·grad_accum micro-batches reads the same samples.
//
// Sources: a synthetic language (a fixed random bigram permutation with 10% noise, learnable
// by a small model in tens of steps) and byte-level text from a file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/scenario/scenario.hpp"

namespace stratagem::runtime {

class DataSource {
 public:
  virtual ~DataSource() = default;
  /// Writes the `length` tokens of global sample `index` (inputs are [0, length−1), targets
  /// [1, length)).
  virtual void sample(std::int64_t index, std::int64_t length, std::int64_t* out) const = 0;
  virtual std::string describe() const = 0;
};

/// The synthetic task: token t+1 = π(token t) with probability 0.9, else uniform; the first
/// token uniform. π is a permutation of the vocabulary drawn from `seed`.
std::unique_ptr<DataSource> make_synthetic_data(std::int64_t vocab, std::uint64_t seed);

/// Byte-level text: sample i is a window of the file starting at an offset drawn from (seed,
/// i). Throws SpecError when the model's vocabulary cannot hold bytes (vocab < 256) or the
/// file is shorter than one window.
std::unique_ptr<DataSource> make_text_data(const std::string& path, std::int64_t vocab,
                                           std::int64_t seq_len, std::uint64_t seed);

/// The global sample index of row `row` of micro-batch `microbatch` on data-parallel rank
/// `dp_index` in step `step` (the mapping above).
std::int64_t sample_index(const scenario::Scenario& s, std::int64_t step, int dp_index,
                          int microbatch, int row);

/// Tokens of one micro-batch, row-major [micro_batch_size, seq_len + 1].
std::vector<std::int64_t> microbatch_tokens(const DataSource& data, const scenario::Scenario& s,
                                            std::int64_t step, int dp_index, int microbatch);

/// A 64-bit hash of two values (splitmix64 of their mix): per-sample random streams.
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b);

}  // namespace stratagem::runtime
