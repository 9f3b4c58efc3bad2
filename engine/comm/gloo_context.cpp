#include "engine/comm/gloo_context.hpp"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "engine/comm/async_work.hpp"
#include "engine/comm/comm_checks.hpp"
#include "engine/comm/comm_progress.hpp"
#include "engine/comm/store.hpp"

namespace stratagem::comm {
namespace {

using Ms = std::chrono::milliseconds;

// Gloo's rendezvous store interface over ours. Gloo's TCP context writes one key per rank (the
// rank's index in the group) and waits for the others', so a timeout names the missing ranks.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<comm::Store> store, std::string prefix, std::vector<int> group,
               Ms timeout, std::string what)
      : store_(std::move(store)),
        prefix_(std::move(prefix)),
        group_(std::move(group)),
        timeout_(timeout),
        what_(std::move(what)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::string(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    const std::string v = store_->get(prefix_ + key);
    return {v.begin(), v.end()};
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys, const Ms& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    if (store_->wait(full, timeout)) return;
    std::string missing;
    for (const auto& k : keys) {
      if (store_->check({prefix_ + k})) continue;
      const bool index = !k.empty() && k.find_first_not_of("0123456789") == std::string::npos &&
                         std::stoul(k) < group_.size();
      missing += (missing.empty() ? "" : ", ") +
                 (index ? std::to_string(group_[std::stoul(k)]) : "'" + k + "'");
    }
    throw RuntimeError(what_ + ": rank(s) " + missing + " did not join within " +
                       duration_text(timeout));
  }

 private:
  std::shared_ptr<comm::Store> store_;
  std::string prefix_;
  std::vector<int> group_;
  Ms timeout_;
  std::string what_;
};

}  // namespace

std::shared_ptr<gloo::transport::Device> open_gloo_device(const std::string& hostname,
                                                          const std::string& iface) {
  gloo::transport::tcp::attr attr;
  if (!iface.empty()) {
    attr.iface = iface;
  } else {
    attr.hostname = hostname;
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw RuntimeError("gloo: cannot open a TCP device on " +
                       (iface.empty() ? "address " + hostname : "interface " + iface) + ": " +
                       e.what());
  }
}

std::shared_ptr<gloo::Context> connect_gloo_context(
    const std::shared_ptr<Store>& store, const std::string& key_prefix,
    const std::vector<int>& group, int rank, std::chrono::milliseconds timeout,
    const std::shared_ptr<gloo::transport::Device>& device, const std::string& what) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(index_in(group, rank),
                                                         static_cast<int>(group.size()));
  ctx->setTimeout(timeout);
  StoreAdapter adapter(store, key_prefix, group, timeout, what);
  auto dev = device;  // connectFullMesh takes a non-const reference
  try {
    ctx->connectFullMesh(adapter, dev);
  } catch (const RuntimeError&) {
    throw;
  } catch (const std::exception& e) {
    throw RuntimeError(what + ": " + e.what());
  }
  return ctx;
}

}  // namespace stratagem::comm
