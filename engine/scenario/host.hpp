#pragma once
// This host: what a hardware profile records about the machine it was measured on
// (engine/measure/calibrate.hpp), and where a profile measured on it is cached so that the
// `cpu` device is measured once per host, on first use (`stratagem calibrate --host`,
// `validate` without --profile, `--profile host`; docs/calibrate-and-validate.md).
#include <filesystem>
#include <string>

namespace stratagem::scenario {

/// /proc/cpuinfo's first "model name", or "unknown".
std::string cpu_model();
/// The 1-minute load average (/proc/loadavg), 0 when unreadable.
double load_average();
/// gethostname, "" when it fails.
std::string hostname();
/// Now as an ISO 8601 UTC timestamp ("2026-12-02T21:30:00Z").
std::string utc_now();

/// What a cached measurement belongs to: the host name (characters other than [A-Za-z0-9._-]
/// become '_') and 16 hex digits of a hash of the CPU model, the logical CPU count and
/// /proc/meminfo's MemTotal, so a renamed image on other hardware does not reuse it.
std::string host_key();

/// Where measurements are cached: $STRATAGEM_CACHE_DIR, else $XDG_CACHE_HOME/stratagem,
/// else $HOME/.cache/stratagem; RuntimeError naming the variables when none is set.
std::filesystem::path cache_dir();

/// Bumped whenever what the host calibration measures changes (the method, or the runtime it
/// times): older entries are then measured anew instead of being reused. 2: the Gloo backend's
/// ring reduce-scatter and CPU workers keeping freed memory (2026-12-04).
inline constexpr int kHostMeasurementVersion = 2;

/// The cached profile of this host's CPU measured with `processes` worker processes running
/// at once: cache_dir() / "cpu-m<version>-<host_key>-x<processes>.json".
std::filesystem::path host_profile_path(int processes);

}  // namespace stratagem::scenario
