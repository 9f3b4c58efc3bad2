#pragma once
// Ring reduce-scatter over a Gloo context's unbound buffers, as NCCL's ring does it: P − 1
// steps; at step s rank r sends its partial sum of chunk (r − s − 1) mod P to rank r + 1 and
// receives rank r − 1's partial sum of chunk (r − s − 2) mod P, to which it adds its own input
// chunk. The last step's sum (chunk r, every rank's contribution) goes straight to `output`.
// Each rank sends and receives (P − 1)/P of the input, the bandwidth optimum.
//
// Why not libgloo's ReduceScatterHalvingDoubling: its run() posts sends from the caller's
// buffer and then, on every rank but 0, memcpy()s its reduced shard over offset 0 of that same
// buffer before the send is known to be complete; when the peer is slow to read, the tail of
// the peer's shard arrives overwritten (seen here: 18,079 wrong elements at 16 MiB under load;
// reported for jax's CPU collectives as jax-ml/jax#40830). Here the input is never written,
// a buffer is reused only after the send from it completed, and nothing is allocated per call:
// the caller passes a workspace it keeps (first-touch page faults cost ~4 ms/MiB on a VM).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gloo {
class Context;
}

namespace stratagem::comm {

/// c = a ⊕ b over n elements (gloo::sum<T>'s signature).
using GlooReduceFn = void (*)(void* c, const void* a, const void* b, std::size_t n);

/// Bytes of workspace ring_reduce_scatter needs for `chunk_bytes`-byte chunks over p ranks:
/// one receive buffer, and for p ≥ 3 one or two partial sums in flight.
std::size_t ring_reduce_scatter_workspace(int p, std::size_t chunk_bytes);

/// `input` holds ctx->size chunks of `chunk_elems` elements (`elem_bytes` each); on return
/// `output` (one chunk, not overlapping `input`) holds the reduction of every rank's chunk
/// ctx->rank. `workspace` grows to ring_reduce_scatter_workspace() and is kept by the caller.
/// `tag` keeps collectives on the same context apart; every rank passes the same one. Throws
/// gloo's IoException on a timeout or a closed connection, and a RuntimeError when aborted.
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const void* input, void* output,
                         std::size_t chunk_elems, std::size_t elem_bytes, GlooReduceFn reduce,
                         std::uint32_t tag, std::chrono::milliseconds timeout,
                         std::vector<char>& workspace);

}  // namespace stratagem::comm
