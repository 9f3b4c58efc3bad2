#pragma once
// A data loader over any random-access LibTorch dataset (`get(i)` -> torch::data::Example<>,
// `size()`), batching by stacking like torch::data's Stack<> collate. On one process it reads
// like torch's own loader; Accelerator::prepare() shards it so each process sees its own part,
// with torch.utils.data.DistributedSampler's rules:
//  - every epoch the dataset's indices are shuffled with seed + epoch (the same permutation
//    on every process) or kept in order;
//  - without drop_last the list is padded to a multiple of the number of processes by
//    repeating its first indices, so every process gets ceil(N / P) samples (a few samples
//    are seen twice per epoch); with drop_last its tail is cut to floor(N / P) · P;
//  - process r takes positions r, r + P, r + 2P, ... of the list (disjoint across processes,
//    together covering the dataset);
//  - with split_batches the loader's batch size is the global one and each process takes
//    batch_size / P of it (so a step sees the same samples however many processes run);
//  - with even_batches false (Accelerate's even_batches=False) nothing is padded: the last
//    processes get one sample fewer, and possibly one batch fewer (fine for evaluation; a
//    training step that some process has no batch for is an error, see Accelerator).
// The padding duplicates are the positions >= N of the list: at the end of each process's
// shard, so real_rows() can tell gather_for_metrics() which rows of a batch to keep.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <torch/data/example.h>
#include <torch/torch.h>

namespace stratagem::accelerate {

struct DataLoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;  ///< also drops a last partial batch, as torch's loader does
  std::uint64_t seed = 42;
  bool even_batches = true;  ///< pad to a multiple of the processes (set by prepare())
};

/// The dataset indices process `rank` of `world` reads in `epoch`, in order (rules above).
std::vector<std::int64_t> shard_indices(std::int64_t dataset_size, int rank, int world,
                                        const DataLoaderOptions& options, std::int64_t epoch);

/// Position in the data, for save_state / load_state.
struct DataPosition {
  std::int64_t epoch = 0;
  std::int64_t batch = 0;  ///< batches already taken in `epoch`
};

class DataLoaderBase;

/// Told by every loader when it hands out a batch (the Accelerator: which loader is being
/// iterated, so the end of its epoch forces a gradient sync, as Accelerate's GradientState).
struct LoaderObserver {
  DataLoaderBase* active = nullptr;
};

class DataLoaderBase {
 public:
  virtual ~DataLoaderBase() = default;
  /// Called by Accelerator::prepare.
  void shard(int rank, int world, bool split_batches, bool even_batches = true,
             LoaderObserver* observer = nullptr);
  bool sharded() const { return observer_ != nullptr; }
  /// The shuffling seed (Accelerator with a seed set: set_seed's).
  void reseed(std::uint64_t seed) { options_.seed = seed; }
  const DataLoaderOptions& options() const { return options_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  /// Batch size per process.
  std::int64_t local_batch_size() const { return local_batch_; }
  DataPosition position() const { return position_; }
  /// The next iteration resumes at `p` (its epoch's shuffle, skipping p.batch batches); a
  /// position after an epoch's last batch is the next epoch's start.
  void set_position(DataPosition p);
  /// The epoch being read (or, between epochs, the next one once a checkpoint resumed).
  std::int64_t epoch() const { return position_.epoch; }
  /// Batches per epoch on this process.
  std::int64_t size() const;
  /// Batches per epoch on process `rank` (they differ only with even_batches false).
  std::int64_t size_of(int rank) const;
  /// The batch last handed out was the last of its epoch.
  bool at_end() const { return started_ && position_.batch >= size(); }
  /// Rows of the batch last handed out on process `rank`: {all, real} (real excludes the
  /// even_batches padding duplicates).
  std::pair<std::int64_t, std::int64_t> rows_of_last_batch(int rank) const;
  virtual std::int64_t dataset_size() const = 0;

 protected:
  explicit DataLoaderBase(DataLoaderOptions o) : options_(o), local_batch_(o.batch_size) {}
  /// The indices of this epoch's batches, starting a new epoch unless resuming.
  std::vector<std::vector<std::int64_t>> begin_epoch();
  DataLoaderOptions options_;
  int rank_ = 0, world_ = 1;
  std::int64_t local_batch_;
  DataPosition position_;
  std::int64_t first_batch_ = 0;  ///< batches of this epoch skipped when resuming
  bool started_ = false, resume_ = false;
  LoaderObserver* observer_ = nullptr;
  /// Samples of process `rank` this epoch: {in its shard, real (not padding)}.
  std::pair<std::int64_t, std::int64_t> samples_of(int rank) const;
};

template <typename Dataset>
class DataLoader : public DataLoaderBase {
 public:
  using Batch = torch::data::Example<>;

  DataLoader(Dataset dataset, DataLoaderOptions options)
      : DataLoaderBase(options), dataset_(std::move(dataset)) {}

  std::int64_t dataset_size() const override {
    return static_cast<std::int64_t>(dataset_.size().value());
  }

  class Iterator {
   public:
    Iterator(DataLoader* loader, std::size_t i) : loader_(loader), i_(i) {}
    Batch& operator*() {
      if (!current_) current_ = loader_->make_batch(i_);
      return *current_;
    }
    Batch* operator->() { return &**this; }
    Iterator& operator++() {
      ++i_;
      current_.reset();
      return *this;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    DataLoader* loader_;
    std::size_t i_;
    std::optional<Batch> current_;
  };

  Iterator begin() {
    batches_ = begin_epoch();
    return Iterator(this, 0);
  }
  Iterator end() { return Iterator(this, batches_.size()); }

 private:
  Batch make_batch(std::size_t i) {
    // Taken once read: a save_state inside the loop body resumes after this batch.
    position_.batch = first_batch_ + static_cast<std::int64_t>(i) + 1;
    if (observer_) observer_->active = this;
    std::vector<at::Tensor> data, target;
    for (std::int64_t index : batches_[i]) {
      auto e = dataset_.get(static_cast<std::size_t>(index));
      data.push_back(e.data);
      target.push_back(e.target);
    }
    return {at::stack(data), at::stack(target)};
  }
  Dataset dataset_;
  std::vector<std::vector<std::int64_t>> batches_;
};

/// `torch::data::make_data_loader`'s counterpart: a shared loader the Accelerator can shard.
template <typename Dataset>
std::shared_ptr<DataLoader<Dataset>> make_data_loader(Dataset dataset, DataLoaderOptions options) {
  return std::make_shared<DataLoader<Dataset>>(std::move(dataset), options);
}

}  // namespace stratagem::accelerate
