#pragma once
// An object whose state save_state / load_state should carry besides the prepared ones
// (Accelerator::register_for_checkpointing, Accelerate's objects with state_dict /
// load_state_dict): a step counter, an EMA copy of the weights, a data augmenter's RNG ...
// Registered objects are saved by every process, in registration order.
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace stratagem::accelerate {

class Checkpointable {
 public:
  virtual ~Checkpointable() = default;
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

}  // namespace stratagem::accelerate
