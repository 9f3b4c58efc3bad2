#pragma once
// `--profile host`: this host's CPU measured once and cached (engine/scenario/host.hpp). The first
// use measures it with `stratagem-runtime calibrate --host` (a few seconds); later uses read
// the cache; `--recalibrate` (validate) or `stratagem calibrate --host` measure again.
#include <string>

namespace stratagem::cli {

/// The cached profile of this host's CPU for `processes` processes, measured first when there
/// is none or `recalibrate`; returns its path. RuntimeError when this build has no LibTorch
/// runtime to measure with, or the measurement fails.
std::string host_profile(int processes, bool recalibrate);

/// `arg` itself, or for "host" host_profile(processes, false).
std::string resolve_profile(const std::string& arg, int processes);

}  // namespace stratagem::cli
