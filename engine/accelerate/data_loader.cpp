#include "engine/accelerate/data_loader.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "engine/scenario/error.hpp"

namespace stratagem::accelerate {

std::vector<std::int64_t> shard_indices(std::int64_t n, int rank, int world,
                                        const DataLoaderOptions& o, std::int64_t epoch) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  if (o.shuffle) {
    // The same permutation on every process: a generator seeded by (seed, epoch) only.
    std::mt19937_64 gen(o.seed + static_cast<std::uint64_t>(epoch));
    for (std::int64_t i = n - 1; i > 0; --i) {
      std::uniform_int_distribution<std::int64_t> pick(0, i);
      std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(pick(gen))]);
    }
  }
  std::int64_t total = 0;
  if (o.drop_last) {
    total = n / world * world;
    all.resize(static_cast<std::size_t>(total));
  } else if (!o.even_batches) {
    total = n;
  } else {
    total = (n + world - 1) / world * world;
    for (std::int64_t i = n; i < total && n > 0; ++i)
      all.push_back(all[static_cast<std::size_t>((i - n) % n)]);
  }
  std::vector<std::int64_t> mine;
  for (std::int64_t i = rank; i < total; i += world)
    mine.push_back(all[static_cast<std::size_t>(i)]);
  return mine;
}

void DataLoaderBase::shard(int rank, int world, bool split_batches, bool even_batches,
                           LoaderObserver* observer) {
  rank_ = rank;
  world_ = world;
  options_.even_batches = even_batches;
  observer_ = observer;
  local_batch_ = options_.batch_size;
  if (split_batches) {
    if (options_.batch_size % world != 0) {
      throw SpecError("split_batches", "the batch size " + std::to_string(options_.batch_size) +
                                           " does not split over " + std::to_string(world) +
                                           " processes");
    }
    local_batch_ = options_.batch_size / world;
  }
}

std::pair<std::int64_t, std::int64_t> DataLoaderBase::samples_of(int rank) const {
  const std::int64_t n = dataset_size();
  if (options_.drop_last) return {n / world_, n / world_};
  // Positions rank, rank + P, ... of the list; those >= n are padding.
  const std::int64_t real = n > rank ? (n - rank + world_ - 1) / world_ : 0;
  return {options_.even_batches ? (n + world_ - 1) / world_ : real, real};
}

std::int64_t DataLoaderBase::size_of(int rank) const {
  const std::int64_t per_rank = samples_of(rank).first;
  return options_.drop_last ? per_rank / local_batch_
                            : (per_rank + local_batch_ - 1) / local_batch_;
}

std::int64_t DataLoaderBase::size() const { return size_of(rank_); }

std::pair<std::int64_t, std::int64_t> DataLoaderBase::rows_of_last_batch(int rank) const {
  const auto [all, real] = samples_of(rank);
  const std::int64_t begin = (position_.batch - 1) * local_batch_;
  const std::int64_t end = std::min(all, begin + local_batch_);
  if (position_.batch < 1 || begin >= all) return {0, 0};
  return {end - begin, std::max<std::int64_t>(0, std::min(end, real) - begin)};
}

void DataLoaderBase::set_position(DataPosition p) {
  if (p.batch >= size()) p = {p.epoch + 1, 0};
  position_ = p;
  resume_ = true;
}

std::vector<std::vector<std::int64_t>> DataLoaderBase::begin_epoch() {
  if (started_ && !resume_) {
    ++position_.epoch;
    position_.batch = 0;
  }
  const std::int64_t skip = resume_ ? position_.batch : 0;
  if (!resume_) position_.batch = 0;
  first_batch_ = skip;
  started_ = true;
  resume_ = false;
  const auto mine = shard_indices(dataset_size(), rank_, world_, options_, position_.epoch);
  std::vector<std::vector<std::int64_t>> batches;
  for (std::size_t i = 0; i < mine.size(); i += static_cast<std::size_t>(local_batch_)) {
    const std::size_t end = std::min(mine.size(), i + static_cast<std::size_t>(local_batch_));
    if (options_.drop_last && end - i < static_cast<std::size_t>(local_batch_)) break;
    batches.emplace_back(mine.begin() + static_cast<std::ptrdiff_t>(i),
                         mine.begin() + static_cast<std::ptrdiff_t>(end));
  }
  // Resuming mid-epoch: the batches already taken are skipped (position_.batch keeps counting).
  if (skip > 0)
    batches.erase(
        batches.begin(),
        batches.begin() + std::min<std::int64_t>(skip, static_cast<std::int64_t>(batches.size())));
  return batches;
}

}  // namespace stratagem::accelerate
