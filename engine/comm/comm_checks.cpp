#include "engine/comm/comm_checks.hpp"

#include <algorithm>

#include "engine/comm/comm_progress.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {

std::vector<int> resolve_group(const GroupSpec& group, int world_size, int rank,
                               const std::string& op) {
  std::vector<int> ranks = group.ranks;
  if (ranks.empty()) {
    ranks.resize(static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r) ranks[static_cast<std::size_t>(r)] = r;
    return ranks;
  }
  const bool sorted = std::is_sorted(ranks.begin(), ranks.end()) &&
                      std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end();
  if (!sorted || ranks.front() < 0 || ranks.back() >= world_size) {
    throw RuntimeError(op + ": group " + group_text(ranks) +
                       " must list distinct global ranks in increasing order, below " +
                       std::to_string(world_size));
  }
  if (index_in(ranks, rank) < 0) {
    throw RuntimeError(op + ": rank " + std::to_string(rank) + " is not a member of group " +
                       group_text(ranks));
  }
  return ranks;
}

int index_in(const std::vector<int>& ranks, int rank) {
  const auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return it != ranks.end() && *it == rank ? static_cast<int>(it - ranks.begin()) : -1;
}

void check_tensor(const at::Tensor& t, const std::string& op, const char* name) {
  if (!t.defined()) throw RuntimeError(op + ": " + name + " is an undefined tensor");
  if (!t.is_contiguous()) throw RuntimeError(op + ": " + name + " must be contiguous");
}

std::size_t tensor_bytes(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * t.element_size();
}

std::string op_text(const std::string& op, std::uint64_t seq, const std::vector<int>& group,
                    const at::Tensor& t) {
  std::string s = op + " #" + std::to_string(seq) + " on " + group_text(group);
  if (t.defined()) {
    s += " (" + std::to_string(tensor_bytes(t)) + " B, " +
         std::string(c10::toString(t.scalar_type())) + ")";
  }
  return s;
}

}  // namespace stratagem::comm
