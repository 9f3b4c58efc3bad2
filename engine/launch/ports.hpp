#pragma once
// TCP port checks for the rendezvous server: fail early with a clear message when the port is
// taken, pick a free one, or wait for a server to listen. The server (c10d's TCPStore) listens on
// every local address, so the checks bind the wildcard address the same way. No LibTorch here.
#include <chrono>
#include <string>

namespace stratagem::launch {

/// Throws RuntimeError naming `port` when a listening socket cannot be bound to it here
/// (another job holds it, or it is privileged).
void check_port_free(int port);

/// A port that is free right now, picked at random just below the kernel's ephemeral range
/// (ip_local_port_range) so that no bind(0) and no outgoing connection takes it before it is
/// used; the kernel's choice when that range is full. Another job picking the same port is
/// still possible, and the rendezvous then reports the port in use.
int find_free_port();

/// Polls until something accepts TCP connections at host:port; false after `timeout` (or when
/// `host` does not resolve). Lets a client wait quietly for a server that starts late.
bool wait_for_listener(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace stratagem::launch
