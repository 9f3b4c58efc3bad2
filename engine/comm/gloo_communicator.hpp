#pragma once
// The Gloo backend for CPU tensors: libgloo's own algorithms (ring all-reduce, ring all-gather,
// one-to-all broadcast, barrier, unbound-buffer send/recv) and our ring reduce-scatter on its
// unbound buffers (gloo_reduce_scatter.hpp: libgloo's halving-doubling one can send corrupted
// data)
// over its TCP transport, with addresses exchanged through the job's Store. c10d's
// ProcessGroupGloo is not used: in LibTorch 1.13 it has no reduce-scatter.
//
// Threads: collectives run one after another on a worker thread in issue order (subgroup
// contexts are connected there on first use, keyed by the rank list); send/recv are posted at
// once on their own full-mesh context and completed by waiter threads, so a pending recv never
// blocks a collective. A failed or timed-out op names the ranks that did not reach it.
#include <chrono>
#include <memory>
#include <string>

#include "engine/comm/communicator.hpp"
#include "engine/launch/dist_env.hpp"

namespace stratagem::comm {

class Store;

struct GlooOptions {
  /// Address the transport listens on and advertises (resolved on this machine).
  std::string hostname = "127.0.0.1";
  /// Network interface to use instead of `hostname` (like GLOO_SOCKET_IFNAME).
  std::string iface;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// Store namespace of this communicator; communicators sharing a store need distinct ones.
  std::string prefix = "gloo/";
};

/// Connects the world (and the point-to-point mesh) now; blocks until every rank did so, or
/// throws RuntimeError naming the ranks that did not join within the timeout.
std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<Store> store, int rank,
                                                     int world_size, const GlooOptions& options);

/// Transport address for this process: the interface in GLOO_SOCKET_IFNAME when set, loopback
/// when the whole job is on this machine, else this machine's host name.
GlooOptions gloo_options_for(const launch::DistEnv& env, std::chrono::milliseconds timeout);

}  // namespace stratagem::comm
