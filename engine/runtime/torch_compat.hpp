#pragma once
// The one place for LibTorch calls whose spelling differs between LibTorch 1.13 (Debian 12)
// and 2.x (GPU machines): c10d::TCPStore construction, and error text without C++ backtraces.
// Include it only from .cpp files that already need c10d.
#include <chrono>
#include <exception>
#include <string>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace stratagem::runtime::compat {

/// A TCPStore server (listening on every local address, `port`) or a client of one at
/// host:port. Waits for no workers: the rendezvous counts arrivals itself to name the missing.
c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                                  std::chrono::milliseconds timeout);

/// e.what() for any exception; for c10::Error, the message without the C++ backtrace that
/// LibTorch 1.13 appends.
std::string error_text(const std::exception& e);

}  // namespace stratagem::runtime::compat
