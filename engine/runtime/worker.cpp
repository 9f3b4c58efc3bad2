#include "engine/runtime/worker.hpp"

#include <thread>

#include <ATen/ATen.h>

#include "engine/plan/builder.hpp"
#include "engine/runtime/checkpoint.hpp"
#include "engine/runtime/model_layout.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

Trainer::Trainer(const scenario::Scenario& scenario, comm::Communicator& comm, TrainOptions options)
    : options_(std::move(options)), comm_(comm) {
  check_runtime_model(scenario.model);
  check_runtime_strategy(scenario.strategy);
  if (comm.world_size() != scenario.world_size()) {
    throw SpecError("strategy.dp",
                    "the scenario needs dp × pp = " + std::to_string(scenario.world_size()) +
                        " processes, the job has " + std::to_string(comm.world_size()));
  }
  // Every rank executes its own ops: no folding of data-parallel replicas.
  plan_ = std::make_unique<plan::StepPlan>(plan::build_plan(scenario, {.fold = false}));
  const auto& s = plan_->scenario;
  data_ = options_.data_file.empty() ? make_synthetic_data(s.model.vocab, s.training.seed)
                                     : make_text_data(options_.data_file, s.model.vocab,
                                                      s.training.seq_len, s.training.seed);
  ExecutorOptions eo;
  eo.optimizer = options_.optimizer;
  eo.seed = s.training.seed;
  eo.timeout = options_.timeout;
  eo.on_op_start = options_.on_op_start;
  if (comm.rank() == options_.inject_inf_rank) eo.inject_inf_steps = options_.inject_inf_steps;
  executor_ = std::make_unique<Executor>(*plan_, comm.rank(), comm, *data_, eo, options_.device);
}

Trainer::~Trainer() = default;

double Trainer::agree_loss(const StepOutcome& out) {
  // [Σ micro-batch losses, count] over the world: only the ranks running the head add.
  auto t = at::tensor({out.loss_sum, static_cast<double>(out.loss_terms)},
                      at::TensorOptions().dtype(at::kDouble))
               .to(options_.device);
  comm_.all_reduce(t, comm::GroupSpec{}, comm::ReduceOp::sum)->wait();
  auto cpu = t.cpu();
  const double terms = cpu[1].item<double>();
  if (terms <= 0) throw RuntimeError("no rank computed a loss in this step");
  return cpu[0].item<double>() / terms;
}

TrainResult Trainer::run() {
  TrainResult r;
  std::int64_t step = 0;
  if (!options_.resume_dir.empty()) {
    if (options_.on_activity)
      options_.on_activity("loading checkpoint from " + options_.resume_dir);
    step = load_checkpoint(options_.resume_dir, *executor_, comm_);
  }
  r.first_step = step;
  const std::int64_t end = step + options_.steps;
  for (; step < end; ++step) {
    if (step == options_.stall_at_step && comm_.rank() == options_.stall_rank) {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until killed
    }
    StepOutcome out = executor_->step(step);
    if (options_.on_activity)
      options_.on_activity("loss all-reduce of step " + std::to_string(step + 1));
    const double loss = agree_loss(out);
    r.losses.push_back(loss);
    r.step_seconds.push_back(out.seconds);
    r.loss_scales.push_back(out.loss_scale);
    r.skipped.push_back(out.skipped);
    r.tp_bytes.push_back(out.tp_bytes);
    if (options_.on_step) options_.on_step(step, loss, out.seconds);
    if (step + 1 == end) r.trace = std::move(out.trace);
    const bool save_now =
        !options_.save_dir.empty() &&
        (step + 1 == end || (options_.save_every > 0 && (step + 1) % options_.save_every == 0));
    if (save_now) {
      SaveOptions so;
      so.kill_after_temp_file = options_.kill_during_save_step == step + 1 &&
                                comm_.rank() == options_.kill_during_save_rank;
      if (options_.on_activity) {
        options_.on_activity("saving checkpoint step-" + std::to_string(step + 1));
      }
      save_checkpoint(options_.save_dir, step + 1, *executor_, comm_, so);
    }
  }
  return r;
}

}  // namespace stratagem::runtime
