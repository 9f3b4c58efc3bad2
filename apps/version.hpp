#pragma once
#include <string>

namespace stratagem {
/// "stratagem 0.1.0 (backends: sim, gloo, nccl; viewer)" — what this binary was built with.
std::string version_text();
}  // namespace stratagem
