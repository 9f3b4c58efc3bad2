#pragma once
// The measured shape of a user's model, for Accelerator::export_scenario(): forward FLOPs and
// activation bytes per unit from one forward under LibTorch's op profiler, with no hooks in
// the user's modules. Units are found by their parameters: the autograd graph behind the loss
// tells which op first read each parameter, and the profiler's autograd sequence numbers put
// that op in time, so every op and allocation of the forward falls to the unit whose first
// parameter read came last before it (ops before any block: the input unit; ops after the
// root's parameters read past the last block: the output unit).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/torch_compat.hpp"
#include "engine/scenario/model.hpp"

namespace stratagem::accelerate {

class DataParallel;

/// A candidate block: a module path and the parameters it owns.
struct BlockCandidate {
  std::string name;
  std::vector<at::Tensor> params;
};

/// The model's blocks: its FSDP units when it is wrapped; else the parameter-owning entries of
/// its largest torch::nn::Sequential; else the root's parameter-owning children; else the whole
/// model as one block.
std::vector<BlockCandidate> find_blocks(torch::nn::Module& model, const DataParallel* dp);

/// Attributes one forward's events to units (pure: tested with made-up events).
///   events:  the profiler's, from the forward's start to the loss
///   graph:   the autograd graph behind the loss (params index into `owner`)
///   owner:   per parameter, its block (index into `blocks`) or -1 (the root's)
///   numel:   per parameter, its elements
///   samples: rows of the micro-batch (figures are divided by it)
/// Returns the model with input, blocks (in the order the forward ran them) and output, and in
/// `last_ops` each block's last autograd op (sequence number; its output is the boundary).
scenario::MeasuredModel attribute_forward(const std::vector<comm::compat::ProfiledEvent>& events,
                                          const std::vector<comm::compat::GraphNode>& graph,
                                          const std::vector<int>& owner,
                                          const std::vector<std::int64_t>& numel,
                                          const std::vector<std::string>& blocks,
                                          std::int64_t samples,
                                          std::vector<std::uint64_t>* last_ops);

/// Measures one forward at a time: arm() before it (restarting the profiler if it was on),
/// finish() with its loss. The profiler runs only between the two.
class ModelMeasurer {
 public:
  ~ModelMeasurer();
  /// (Re)starts the profiler for the coming forward; false when it cannot (another profiler
  /// is on), and from then on.
  bool arm();
  /// Stops the profiler without measuring.
  void disarm();
  bool armed() const { return armed_; }
  /// Ends the forward that produced `loss` and measures it (the previous result is replaced).
  /// `element_bytes`: bytes per activation element of this forward (4 fp32, 2 autocast).
  void finish(const at::Tensor& loss, torch::nn::Module& model, const DataParallel* dp,
              std::int64_t samples, double element_bytes);
  int measured() const { return measured_; }
  /// The last measurement (blocks empty when none).
  const scenario::MeasuredModel& result() const { return result_; }

 private:
  bool armed_ = false;
  bool unavailable_ = false;  ///< the profiler could not start once: measure nothing
  int measured_ = 0;
  scenario::MeasuredModel result_;
};

/// A measurement as JSON and back (exchanged between processes).
nlohmann::json measured_to_json(const scenario::MeasuredModel& m);
scenario::MeasuredModel measured_from_json(const nlohmann::json& j);
/// The processes' measurements as one model: the union of their blocks by name, each the mean
/// over the processes that measured it (data-parallel replicas: all; a pipeline: a stage's),
/// in first-seen order with numeric names (a pipeline's Sequential indices) sorted; input and
/// output units averaged; the boundary the median.
scenario::MeasuredModel merge_measurements(const std::vector<scenario::MeasuredModel>& all);

}  // namespace stratagem::accelerate
