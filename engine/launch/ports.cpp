#include "engine/launch/ports.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "engine/scenario/error.hpp"

namespace stratagem::launch {
namespace {

// Binds a listening IPv4 socket on the wildcard address; returns the bound port or -errno.
int try_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  // c10d sets SO_REUSEADDR too: a port left in TIME_WAIT by an earlier job is usable.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int result = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1) != 0) {
    result = -errno;
  } else {
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    result = ntohs(addr.sin_port);
  }
  ::close(fd);
  return result;
}

}  // namespace

void check_port_free(int port) {
  if (port < 1 || port > 65535) {
    throw RuntimeError("port " + std::to_string(port) + " is not a TCP port (1-65535)");
  }
  const int r = try_bind(port);
  if (r == -EADDRINUSE) {
    throw RuntimeError("port " + std::to_string(port) +
                       " is already in use on this machine (another job?); choose another "
                       "with --main_process_port, or 0 for a free one");
  }
  if (r < 0) {
    throw RuntimeError("cannot listen on port " + std::to_string(port) + ": " + std::strerror(-r));
  }
}

bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool ok = false;
  while (!ok) {
    for (addrinfo* a = found; a && !ok; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      ::close(fd);
    }
    if (ok || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
  return ok;
}

int find_free_port() {
  // A port just below the kernel's ephemeral range: ports there are never handed to a bind(0)
  // or to the local end of an outgoing connection, so the one found stays free until the job's
  // store binds it. (A port from bind(0) can be taken in between by any process's connection
  // or by Gloo's pair listeners: seen as a rare "address in use" with tests running in
  // parallel.) The start is random so concurrent jobs pick different ports.
  int low = 32768, high = 60999;
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    if (!(range >> low >> high)) low = 32768;
  }
  const int top = low - 1, bottom = std::max(1024, low - 10000);
  if (top > bottom) {
    std::random_device seed;
    const int span = top - bottom + 1;
    const int start = static_cast<int>(seed() % static_cast<unsigned>(span));
    for (int k = 0; k < std::min(span, 200); ++k) {
      const int port = bottom + (start + k) % span;
      if (try_bind(port) == port) return port;
    }
  }
  const int r = try_bind(0);
  if (r < 0) throw RuntimeError(std::string("cannot find a free TCP port: ") + std::strerror(-r));
  return r;
}

}  // namespace stratagem::launch
