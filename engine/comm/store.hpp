#pragma once
// The job's key-value store (c10d's TCPStore underneath; rank 0 hosts it unless torchrun's
// agent does) and the rendezvous that brings all ranks together through it. Communicators use
// it to exchange addresses and NCCL ids and to publish progress for timeout reports. The
// header keeps LibTorch out.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/launch/dist_env.hpp"

namespace stratagem::comm {

struct StoreOptions {
  std::string host = "127.0.0.1";  ///< where clients connect; the server listens on all addresses
  int port = 29500;
  bool is_server = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// Prepended to every key (torchrun attempts, separate jobs sharing a store in tests).
  std::string key_prefix;
};

/// Thread-safe: calls on one Store are serialised; a blocking get() holds the connection, so
/// threads that must not wait behind it take their own connection (connect_client()).
class Store {
 public:
  /// Starts the server or connects to it. Throws RuntimeError naming host and port: port in
  /// use (server), or nobody listening there within the timeout (client).
  static std::shared_ptr<Store> open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(const std::string& key, const std::string& value);
  /// Waits up to `timeout` (default: the store's) for the key; throws RuntimeError naming it.
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  /// True when every key exists now.
  bool check(const std::vector<std::string>& keys);
  /// Waits until every key exists; false after `timeout`.
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::int64_t add(const std::string& key, std::int64_t delta);

  /// A second connection to the same server, for a thread that must not queue behind this one.
  std::shared_ptr<Store> connect_client() const;
  /// The same connection with `prefix` appended to the key prefix.
  std::shared_ptr<Store> with_prefix(const std::string& prefix) const;

  const StoreOptions& options() const { return options_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  /// "127.0.0.1:29500"
  std::string address() const;

 private:
  struct Connection;
  Store(StoreOptions options, std::shared_ptr<Connection> connection);
  StoreOptions options_;
  std::shared_ptr<Connection> connection_;
};

/// Connects this rank to the job's store and waits until all `env.world_size` ranks have
/// arrived. Rank 0 hosts the server (after checking the port) unless torchrun's agent hosts it.
/// Throws RuntimeError: port in use (naming it), store unreachable, or after `timeout` naming
/// the ranks that never arrived, or ranks that disagree on WORLD_SIZE.
std::shared_ptr<Store> rendezvous(const launch::DistEnv& env, std::chrono::milliseconds timeout);

}  // namespace stratagem::comm
