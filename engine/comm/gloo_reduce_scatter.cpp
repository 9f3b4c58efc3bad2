#include "engine/comm/gloo_reduce_scatter.hpp"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>

#include "engine/scenario/error.hpp"

namespace stratagem::comm {
namespace {

// A slot prefix of our own, clear of libgloo's (0x01 gather … 0x08 all-to-all in gloo/types.h).
constexpr std::uint8_t kRingReduceScatterSlotPrefix = 0x21;

int wrap(int i, int p) {
  return ((i % p) + p) % p;
}

}  // namespace

std::size_t ring_reduce_scatter_workspace(int p, std::size_t chunk_bytes) {
  if (p <= 1) return 0;
  return chunk_bytes * static_cast<std::size_t>(1 + std::min(2, p - 2));
}

void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const void* input, void* output,
                         std::size_t chunk_elems, std::size_t elem_bytes, GlooReduceFn reduce,
                         std::uint32_t tag, std::chrono::milliseconds timeout,
                         std::vector<char>& workspace) {
  const int p = ctx->size;
  const int r = ctx->rank;
  const std::size_t chunk_bytes = chunk_elems * elem_bytes;
  const auto* in_base = static_cast<const char*>(input);
  if (chunk_bytes == 0) return;
  if (p == 1) {
    std::memcpy(output, input, chunk_bytes);
    return;
  }
  const std::size_t need = ring_reduce_scatter_workspace(p, chunk_bytes);
  if (workspace.size() < need) workspace.resize(need);
  char* incoming = workspace.data();
  char* partial[2] = {incoming + chunk_bytes, incoming + 2 * chunk_bytes};
  auto input_chunk = [&](int i) { return in_base + static_cast<std::size_t>(i) * chunk_bytes; };

  const int next = wrap(r + 1, p);
  const int prev = wrap(r - 1, p);
  // Messages between one pair are matched in posting order, and each step completes before
  // the next is posted, so one slot serves every step.
  const auto slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);
  auto in = ctx->createUnboundBuffer(incoming, chunk_bytes);
  for (int s = 0; s < p - 1; ++s) {
    // Step 0 sends this rank's own chunk as it is; later steps the partial sum the previous
    // step wrote. The send buffer is read-only to gloo: the cast only fits its interface.
    const void* send_from = s == 0 ? input_chunk(wrap(r - 1, p)) : partial[(s - 1) % 2];
    char* sum_to = s == p - 2 ? static_cast<char*>(output) : partial[s % 2];
    auto out = ctx->createUnboundBuffer(const_cast<void*>(send_from), chunk_bytes);
    in->recv(prev, slot);
    out->send(next, slot);
    if (!in->waitRecv(timeout)) throw RuntimeError("reduce_scatter: receive aborted");
    // partial[s % 2] was last sent at step s − 2 (waited then), so it is free to write.
    reduce(sum_to, input_chunk(wrap(r - s - 2, p)), incoming, chunk_elems);
    if (!out->waitSend(timeout)) throw RuntimeError("reduce_scatter: send aborted");
  }
}

}  // namespace stratagem::comm
