#include "engine/workload/work.hpp"

namespace stratagem::workload {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::backward_input:
      return "backward_input";
    case Phase::backward_weight:
      return "backward_weight";
    case Phase::recompute:
      return "recompute";
    case Phase::optimizer:
      return "optimizer";
    case Phase::loss_scale_check:
      return "loss_scale_check";
  }
  return "?";
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_to_all:
      return "all_to_all";
  }
  return "?";
}

}  // namespace stratagem::workload
