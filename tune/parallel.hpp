#pragma once
// Runs body(0) … body(count − 1) on `threads` threads (≤ 0: one per hardware thread), each
// index once, the calling thread among them; rethrows the first exception a body threw once
// all have finished. The measured fit's simulations and the cross-validation's predictions.
#include <cstddef>
#include <functional>

namespace stratagem::tune {

void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& body);

}  // namespace stratagem::tune
