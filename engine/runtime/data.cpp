#include "engine/runtime/data.hpp"

#include <fstream>
#include <iterator>
#include <numeric>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

// Fraction of synthetic tokens replaced by uniform noise: keeps the task from being
// memorised exactly while leaving most of each sequence predictable.
constexpr std::uint64_t kNoisePerMille = 100;
constexpr std::int64_t kByteVocab = 256;

// splitmix64 (Steele, Lea, Flood 2014): a small, well-mixed generator for per-sample streams.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (modulo bias below 2^-40 for the sizes used here).
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

class SyntheticData final : public DataSource {
 public:
  SyntheticData(std::int64_t vocab, std::uint64_t seed) : vocab_(vocab), seed_(seed) {
    perm_.resize(static_cast<std::size_t>(vocab));
    std::iota(perm_.begin(), perm_.end(), 0);
    SplitMix rng(mix_seed(seed, 0x5045524D));       // "PERM"
    for (std::int64_t i = vocab - 1; i > 0; --i) {  // Fisher–Yates
      std::swap(perm_[i], perm_[rng.below(static_cast<std::uint64_t>(i) + 1)]);
    }
  }

  void sample(std::int64_t index, std::int64_t length, std::int64_t* out) const override {
    SplitMix rng(mix_seed(seed_, static_cast<std::uint64_t>(index)));
    const auto v = static_cast<std::uint64_t>(vocab_);
    out[0] = static_cast<std::int64_t>(rng.below(v));
    for (std::int64_t t = 1; t < length; ++t) {
      const bool noise = rng.below(1000) < kNoisePerMille;
      const auto random = static_cast<std::int64_t>(rng.below(v));
      out[t] = noise ? random : perm_[out[t - 1]];
    }
  }

  std::string describe() const override {
    return "synthetic bigram language (vocab " + std::to_string(vocab_) + ", 10% noise)";
  }

 private:
  std::int64_t vocab_;
  std::uint64_t seed_;
  std::vector<std::int64_t> perm_;
};

class TextData final : public DataSource {
 public:
  TextData(std::string path, std::string bytes, std::uint64_t seed)
      : path_(std::move(path)), bytes_(std::move(bytes)), seed_(seed) {}

  void sample(std::int64_t index, std::int64_t length, std::int64_t* out) const override {
    const auto windows =
        static_cast<std::uint64_t>(bytes_.size()) - static_cast<std::uint64_t>(length) + 1;
    SplitMix rng(mix_seed(seed_, static_cast<std::uint64_t>(index)));
    const std::uint64_t start = rng.below(windows);
    for (std::int64_t t = 0; t < length; ++t) {
      out[t] = static_cast<unsigned char>(bytes_[start + static_cast<std::uint64_t>(t)]);
    }
  }

  std::string describe() const override {
    return "bytes of " + path_ + " (" + std::to_string(bytes_.size()) + " bytes)";
  }

 private:
  std::string path_;
  std::string bytes_;
  std::uint64_t seed_;
};

}  // namespace

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  SplitMix rng(a ^ (b * 0xD1B54A32D192ED03ULL));
  return rng.next();
}

std::unique_ptr<DataSource> make_synthetic_data(std::int64_t vocab, std::uint64_t seed) {
  return std::make_unique<SyntheticData>(vocab, seed);
}

std::unique_ptr<DataSource> make_text_data(const std::string& path, std::int64_t vocab,
                                           std::int64_t seq_len, std::uint64_t seed) {
  if (vocab < kByteVocab) {
    throw SpecError("--data",
                    "byte-level text needs a model vocabulary of at least 256, the "
                    "model has " +
                        std::to_string(vocab));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError("--data", "cannot read " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<std::int64_t>(bytes.size()) < seq_len + 1) {
    throw SpecError("--data", path + " has " + std::to_string(bytes.size()) +
                                  " bytes, fewer than one training window (seq_len + 1 = " +
                                  std::to_string(seq_len + 1) + ")");
  }
  return std::make_unique<TextData>(path, std::move(bytes), seed);
}

std::int64_t sample_index(const scenario::Scenario& s, std::int64_t step, int dp_index,
                          int microbatch, int row) {
  const std::int64_t mbs = s.strategy.micro_batch_size;
  return step * s.training.global_batch + dp_index * mbs * s.strategy.grad_accum +
         microbatch * mbs + row;
}

std::vector<std::int64_t> microbatch_tokens(const DataSource& data, const scenario::Scenario& s,
                                            std::int64_t step, int dp_index, int microbatch) {
  const std::int64_t len = s.training.seq_len + 1;
  const int rows = s.strategy.micro_batch_size;
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows * len));
  for (int i = 0; i < rows; ++i) {
    data.sample(sample_index(s, step, dp_index, microbatch, i), len, out.data() + i * len);
  }
  return out;
}

}  // namespace stratagem::runtime
