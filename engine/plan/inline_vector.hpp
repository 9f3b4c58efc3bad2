#pragma once
// A vector that holds its first N elements inside itself and moves to the heap beyond them:
// a draft op's deps and memory effects (one to three each), which as std::vectors were two
// allocations per op and a third of the plan builder's time. Only what the passes use: append,
// iterate, clear. (boost::container::small_vector does this; one header is not worth a Boost
// dependency.)
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace stratagem::plan {

template <typename T, std::size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) { append(items.begin(), items.end()); }
  InlineVector(const std::vector<T>& items) { append(items.begin(), items.end()); }  // NOLINT
  InlineVector(const InlineVector&) = default;
  InlineVector& operator=(const InlineVector&) = default;
  /// A moved-from vector is empty (not a size that points into a moved heap).
  InlineVector(InlineVector&& o) noexcept
      : inline_(o.inline_), size_(o.size_), heap_(std::move(o.heap_)) {
    o.clear();
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      inline_ = o.inline_;
      size_ = o.size_;
      heap_ = std::move(o.heap_);
      o.clear();
    }
    return *this;
  }

  T* begin() { return spilled() ? heap_.data() : inline_.data(); }
  T* end() { return begin() + size_; }
  const T* begin() const { return spilled() ? heap_.data() : inline_.data(); }
  const T* end() const { return begin() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return begin()[i]; }
  const T& operator[](std::size_t i) const { return begin()[i]; }

  void push_back(const T& value) {
    if (size_ < N) {
      inline_[size_] = value;
    } else {
      if (size_ == N) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(value);
    }
    ++size_;
  }
  template <typename It>
  void append(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  void clear() {
    size_ = 0;
    heap_.clear();
  }

 private:
  bool spilled() const { return size_ > N; }
  std::array<T, N> inline_ = std::array<T, N>();
  std::uint32_t size_ = 0;
  std::vector<T> heap_;  ///< every element once there are more than N
};

}  // namespace stratagem::plan
