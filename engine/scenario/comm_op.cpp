#include "engine/scenario/comm_op.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

const char* to_string(CommOp op) {
  switch (op) {
    case CommOp::all_reduce:
      return "all_reduce";
    case CommOp::reduce_scatter:
      return "reduce_scatter";
    case CommOp::all_gather:
      return "all_gather";
    case CommOp::broadcast:
      return "broadcast";
    case CommOp::sendrecv:
      return "sendrecv";
  }
  return "?";
}

CommOp parse_comm_op(const std::string& name, const std::string& path) {
  std::string key;
  for (char c : name) {
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (key == "allreduce") return CommOp::all_reduce;
  if (key == "reducescatter") return CommOp::reduce_scatter;
  if (key == "allgather") return CommOp::all_gather;
  if (key == "broadcast") return CommOp::broadcast;
  if (key == "sendrecv" || key == "p2p") return CommOp::sendrecv;
  throw SpecError(path, "unknown operation \"" + name +
                            "\" (all_reduce, reduce_scatter, all_gather, broadcast, sendrecv)");
}

double bus_factor(CommOp op, int n) {
  if (n <= 1) return 1.0;
  switch (op) {
    case CommOp::all_reduce:
      return 2.0 * (n - 1) / n;
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
      return static_cast<double>(n - 1) / n;
    case CommOp::broadcast:
    case CommOp::sendrecv:
      return 1.0;
  }
  return 1.0;
}

std::int64_t parse_size(const std::string& text, const std::string& path) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw SpecError(path, "expected a size such as 8, 4K, 64M or 1G, got \"" + text + "\"");
  }
  double scale = 1;
  std::string suffix = text.substr(used);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix == "K" || suffix == "k") {
    scale = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g") {
    scale = 1024.0 * 1024 * 1024;
  } else if (!suffix.empty()) {
    throw SpecError(path, "unknown size suffix in \"" + text + "\" (K, M or G)");
  }
  const double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 1e15 || bytes != std::floor(bytes)) {
    throw SpecError(path, "must be a whole number of bytes >= 1, got \"" + text + "\"");
  }
  return static_cast<std::int64_t>(bytes);
}

std::string format_size(std::int64_t bytes) {
  const char* suffixes[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + suffixes[i];
}

std::vector<std::int64_t> size_sweep(std::int64_t min_bytes, std::int64_t max_bytes,
                                     double factor) {
  if (min_bytes < 1) throw SpecError("-b", "must be >= 1 byte");
  if (max_bytes < min_bytes) throw SpecError("-e", "must be >= -b");
  if (!(factor > 1.0)) throw SpecError("-f", "must be > 1");
  std::vector<std::int64_t> sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * (1 + 1e-9);
       s *= factor) {
    const auto b = static_cast<std::int64_t>(std::llround(s));
    if (sizes.empty() || b > sizes.back()) sizes.push_back(b);
  }
  return sizes;
}

std::int64_t element_count(CommOp op, std::int64_t size_bytes, int element_bytes, int n) {
  std::int64_t count = size_bytes / std::max(element_bytes, 1);
  if (op == CommOp::reduce_scatter || op == CommOp::all_gather) {
    const std::int64_t ranks = std::max(n, 1);
    count = std::max(ranks, count / ranks * ranks);
  }
  return std::max<std::int64_t>(count, 1);
}

}  // namespace stratagem::scenario
