#pragma once
// Argument checks shared by the backends, so every backend rejects the same misuse with the
// same message (RuntimeError: these are executor bugs, not user input).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/communicator.hpp"

namespace stratagem::comm {

/// The group's ranks (world when empty), checked sorted, unique, in range and containing
/// `rank`.
std::vector<int> resolve_group(const GroupSpec& group, int world_size, int rank,
                               const std::string& op);
/// Position of `rank` in `ranks`, or -1.
int index_in(const std::vector<int>& ranks, int rank);
/// Throws unless `t` is defined and contiguous.
void check_tensor(const at::Tensor& t, const std::string& op, const char* name);
/// Bytes of the tensor's data.
std::size_t tensor_bytes(const at::Tensor& t);
/// "all_reduce #3 on [0,1] (4096 B, Float)"
std::string op_text(const std::string& op, std::uint64_t seq, const std::vector<int>& group,
                    const at::Tensor& t);

}  // namespace stratagem::comm
