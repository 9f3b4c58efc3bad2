#include "engine/plan/plan.hpp"

namespace stratagem::plan {

const char* to_string(Stream s) {
  switch (s) {
    case Stream::compute:
      return "compute";
    case Stream::collective:
      return "collective";
    case Stream::gather:
      return "gather";
    case Stream::p2p:
      return "p2p";
    case Stream::tp:
      return "tp";
    case Stream::cp:
      return "cp";
    case Stream::ep:
      return "ep";
  }
  return "?";
}

const char* to_string(TensorClass c) {
  switch (c) {
    case TensorClass::params:
      return "params";
    case TensorClass::grads:
      return "grads";
    case TensorClass::optimizer:
      return "optimizer";
    case TensorClass::master_weights:
      return "master_weights";
    case TensorClass::activations:
      return "activations";
    case TensorClass::gathered_params:
      return "gathered_params";
    case TensorClass::comm_buckets:
      return "comm_buckets";
    case TensorClass::loss_scale:
      return "loss_scale";
    case TensorClass::fp8_weights:
      return "fp8_weights";
    case TensorClass::count:
      break;
  }
  return "?";
}

const char* to_string(CommPurpose p) {
  switch (p) {
    case CommPurpose::grad_sync:
      return "grad_sync";
    case CommPurpose::param_gather:
      return "param_gather";
    case CommPurpose::tied_embedding:
      return "tied_embedding";
    case CommPurpose::found_inf:
      return "found_inf";
    case CommPurpose::tensor_parallel:
      return "tensor_parallel";
    case CommPurpose::context_parallel:
      return "context_parallel";
    case CommPurpose::sequence_parallel_grads:
      return "sequence_parallel_grads";
    case CommPurpose::expert_parallel:
      return "expert_parallel";
  }
  return "?";
}

std::vector<int> StepPlan::built_ranks() const {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (ranks[r].built) out.push_back(r);
  }
  return out;
}

}  // namespace stratagem::plan
