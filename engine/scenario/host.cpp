#include "engine/scenario/host.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {
namespace {

/// The value of the first /proc-style "key<sep> value" line starting with `key`, or "".
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

/// FNV-1a, 64 bits: stable across builds and platforms (std::hash is not).
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

std::string cpu_model() {
  const std::string v = proc_field("/proc/cpuinfo", "model name");
  return v.empty() ? "unknown" : v;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_key() {
  std::string name = hostname();
  if (name.empty()) name = "host";
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  const std::string hardware = cpu_model() + "|" +
                               std::to_string(std::thread::hardware_concurrency()) + "|" +
                               proc_field("/proc/meminfo", "MemTotal");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(hardware)));
  return name + "-" + hex;
}

std::filesystem::path cache_dir() {
  if (const char* d = env("STRATAGEM_CACHE_DIR")) return d;
  if (const char* d = env("XDG_CACHE_HOME")) return std::filesystem::path(d) / "stratagem";
  if (const char* d = env("HOME")) return std::filesystem::path(d) / ".cache" / "stratagem";
  throw RuntimeError(
      "no cache directory for this host's measurements: set STRATAGEM_CACHE_DIR, "
      "XDG_CACHE_HOME or HOME");
}

std::filesystem::path host_profile_path(int processes) {
  if (processes < 1) throw SpecError("--num_processes", "must be >= 1");
  return cache_dir() / ("cpu-m" + std::to_string(kHostMeasurementVersion) + "-" + host_key() +
                        "-x" + std::to_string(processes) + ".json");
}

}  // namespace stratagem::scenario
