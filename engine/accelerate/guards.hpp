#pragma once
// Scopes the Accelerator hands out (Accelerate's context managers).
#include <optional>

#include <c10/core/DeviceType.h>

namespace stratagem::accelerate {

class Accelerator;

/// Accelerator::no_sync(): backwards inside accumulate gradients locally, with no
/// communication and no optimizer step, whatever the accumulation count says (DDP's no_sync).
class [[nodiscard]] NoSyncGuard {
 public:
  explicit NoSyncGuard(Accelerator& acc);
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  Accelerator& acc_;
};

/// Accelerator::autocast(enabled): the job's mixed precision on (or off) for the scope, e.g.
/// around evaluation code; the previous state comes back at the end.
class [[nodiscard]] AutocastGuard {
 public:
  AutocastGuard(Accelerator& acc, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Accelerator& acc_;
  bool was_;
};

}  // namespace stratagem::accelerate
