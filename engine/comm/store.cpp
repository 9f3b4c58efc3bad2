#include "engine/comm/store.hpp"

#include <unistd.h>

#include <sstream>
#include <thread>

#include "engine/comm/torch_compat.hpp"
#include "engine/launch/ports.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::comm {

struct Store::Connection {
  c10::intrusive_ptr<c10d::TCPStore> tcp;
};

namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string ms_text(std::chrono::milliseconds t) {
  std::ostringstream s;
  if (t.count() % 1000 == 0) {
    s << t.count() / 1000 << " s";
  } else {
    s << t.count() << " ms";
  }
  return s.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

}  // namespace

Store::Store(StoreOptions options, std::shared_ptr<Connection> connection)
    : options_(std::move(options)), connection_(std::move(connection)) {}

Store::~Store() = default;

std::shared_ptr<Store> Store::open(const StoreOptions& options) {
  if (options.is_server) launch::check_port_free(options.port);
  auto conn = std::make_shared<Connection>();
  const std::string where = options.host + ":" + std::to_string(options.port);
  // The server may start seconds after its clients (its process is still loading). c10d's
  // client gives up early on a refused connection and logs every retry, so wait for the
  // listener quietly first.
  if (!options.is_server &&
      !launch::wait_for_listener(options.host, options.port, options.timeout)) {
    throw RuntimeError("cannot reach the rendezvous store at " + where + " within " +
                       ms_text(options.timeout) +
                       " (is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?)");
  }
  try {
    conn->tcp =
        compat::make_tcp_store(options.host, options.port, options.is_server, options.timeout);
  } catch (const std::exception& e) {
    if (options.is_server) {
      throw RuntimeError("cannot start the rendezvous store on port " +
                         std::to_string(options.port) + ": " + compat::error_text(e));
    }
    throw RuntimeError("cannot connect to the rendezvous store at " + where + ": " +
                       compat::error_text(e));
  }
  return std::shared_ptr<Store>(new Store(options, std::move(conn)));
}

std::string Store::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

void Store::set(const std::string& key, const std::string& value) {
  try {
    connection_->tcp->set(options_.key_prefix + key, bytes(value));
  } catch (const std::exception& e) {
    throw RuntimeError("store " + address() + ": set '" + key + "': " + compat::error_text(e));
  }
}

std::string Store::get(const std::string& key) {
  return get(key, options_.timeout);
}

std::string Store::get(const std::string& key, std::chrono::milliseconds timeout) {
  if (!wait({key}, timeout)) {
    throw RuntimeError("store " + address() + ": key '" + key + "' did not appear within " +
                       ms_text(timeout));
  }
  try {
    const auto v = connection_->tcp->get(options_.key_prefix + key);
    return {v.begin(), v.end()};
  } catch (const std::exception& e) {
    throw RuntimeError("store " + address() + ": get '" + key + "': " + compat::error_text(e));
  }
}

bool Store::check(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(options_.key_prefix + k);
  try {
    return connection_->tcp->check(full);
  } catch (const std::exception& e) {
    throw RuntimeError("store " + address() + " unreachable: " + compat::error_text(e));
  }
}

bool Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(options_.key_prefix + k);
  try {
    connection_->tcp->wait(full, timeout);
    return true;
  } catch (const std::exception&) {
    // A timeout and a lost connection throw alike; a check tells them apart.
    return check(keys);
  }
}

std::int64_t Store::add(const std::string& key, std::int64_t delta) {
  try {
    return connection_->tcp->add(options_.key_prefix + key, delta);
  } catch (const std::exception& e) {
    throw RuntimeError("store " + address() + ": add '" + key + "': " + compat::error_text(e));
  }
}

std::shared_ptr<Store> Store::connect_client() const {
  StoreOptions o = options_;
  o.is_server = false;
  return open(o);
}

std::shared_ptr<Store> Store::with_prefix(const std::string& prefix) const {
  StoreOptions o = options_;
  o.key_prefix += prefix;
  return std::shared_ptr<Store>(new Store(o, connection_));
}

namespace {

// Polls until every rank's arrival key exists. Rank 0 decides a timeout for everyone: it
// publishes the missing ranks and, as it usually hosts the store, waits briefly for the ranks
// present to read that before it exits (otherwise they would only see a closed connection).
void wait_for_all(Store& store, const launch::DistEnv& env, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  const std::string abort_key = "rdzv/abort";
  while (true) {
    try {
      if (store.check(keys)) return;
      if (env.rank != 0 && store.check({abort_key})) {
        const std::string why = store.get(abort_key);
        store.add("rdzv/abort_seen", 1);
        throw RuntimeError(why);
      }
    } catch (const RuntimeError& e) {
      if (std::string(e.what()).find("unreachable") == std::string::npos) throw;
      throw RuntimeError("rank " + std::to_string(env.rank) + ": the rendezvous store at " +
                         store.address() + " went away (rank 0 exited?): " + e.what());
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<int> missing;
  for (int r = 0; r < env.world_size; ++r) {
    if (!store.check({keys[static_cast<std::size_t>(r)]})) missing.push_back(r);
  }
  const std::string why = "rendezvous at " + store.address() + " timed out after " +
                          ms_text(timeout) + ": rank" + (missing.size() > 1 ? "s " : " ") +
                          rank_list(missing) + " of " + std::to_string(env.world_size) +
                          " did not arrive";
  if (env.rank == 0) {
    store.set(abort_key, why);
    const auto present = static_cast<std::int64_t>(env.world_size - missing.size()) - 1;
    const auto linger = Clock::now() + std::chrono::seconds(2);
    while (store.add("rdzv/abort_seen", 0) < present && Clock::now() < linger) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  throw RuntimeError(why);
}

}  // namespace

namespace {

// A connection the other end dropped: worth a new connection, unlike a refusal after the whole
// timeout or a bad address.
bool connection_dropped(const std::string& what) {
  for (const char* sign : {"Connection reset by peer", "Broken pipe", "Connection closed by peer",
                           "ECONNRESET", "EPIPE"}) {
    if (what.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<Store> rendezvous(const launch::DistEnv& env, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  StoreOptions o;
  o.host = env.master_addr;
  o.port = env.master_port;
  o.is_server = env.rank == 0 && !env.use_agent_store;
  o.timeout = timeout;
  o.key_prefix = "stratagem/attempt_" + std::to_string(env.restart_count) + "/";

  // Each rank announces itself; every rank then waits for all, so whoever times out can list
  // exactly who is missing.
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string me =
      std::to_string(env.world_size) + " " + host + " " + std::to_string(::getpid());
  // A client's connection can be dropped by the other end before its first request is answered
  // (seen under CI load: rank 1's announcement failed with "Connection reset by peer", e.g. from
  // a listener that was going away on that port). The announcement is idempotent: a client
  // reads it back (a round trip, as a set is not answered), and while the connection is dropped
  // before that, it connects again and repeats it until the rendezvous timeout. A connection
  // lost after that is the store going away, reported as before.
  const auto deadline = Clock::now() + timeout;
  const std::string arrival = "rdzv/arrived/" + std::to_string(env.rank);
  std::shared_ptr<Store> store;
  while (true) {
    try {
      store = Store::open(o);
      store->set(arrival, me);
      if (!store->check({arrival})) {
        throw RuntimeError("store " + store->address() + ": the announcement '" + arrival +
                           "' was not stored");
      }
      break;
    } catch (const RuntimeError& e) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (o.is_server || !connection_dropped(e.what()) || left.count() <= 100) {
        throw RuntimeError("rank " + std::to_string(env.rank) + ": " + e.what());
      }
      store.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      o.timeout = left - std::chrono::milliseconds(100);
    }
  }
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back("rdzv/arrived/" + std::to_string(r));
  wait_for_all(*store, env, keys, timeout);
  // Agreeing on the world size with rank 0 catches mixed-up launch commands.
  const std::string zero = store->get(keys[0]);
  const int zero_world = std::stoi(zero.substr(0, zero.find(' ')));
  if (zero_world != env.world_size) {
    throw RuntimeError("rank " + std::to_string(env.rank) +
                       " has WORLD_SIZE=" + std::to_string(env.world_size) + " but rank 0 (" +
                       zero.substr(zero.find(' ') + 1) + ") has " + std::to_string(zero_world));
  }
  return store;
}

}  // namespace stratagem::comm
