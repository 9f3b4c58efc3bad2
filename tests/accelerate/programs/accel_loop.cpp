// The training loop of Accelerate's docs, as the loop-semantics tests launch it
// (tests/accelerate/test_loop_semantics.cpp): an MLP on deterministic data, SGD with
// momentum, a StepLR scheduler (halving every 10 steps), clip_grad_norm_, an evaluation loader read through
// gather_for_metrics, trackers, a registered object, save/resume. Flags (all optional):
//   --epochs E --batch B --train N --eval N --clip C (max norm; 0: none) --clip_value V
//   --sched original|prepared|none (which optimizer the scheduler is built on)
//   --no_sync_every K (every K-th batch's backward inside no_sync)
//   --eval_first 1 (prepare the evaluation loader before the training one; both named)
//   --save_dir D --save_at S [--die_after_save 1] --resume D --out params.bin --log_dir D
//   --mistake plain_backward|original_step|prepare_twice   --free_memory 1
//   --inf_step S (rank 0's loss is inf in optimizer step S + 1: fp16 skips that step)
// Output (main process): "step S loss L lr R norm N skipped 0|1" per optimizer step, then
// "eval rows R sum X" per epoch and "seen S" (the registered counter) at the end.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include <torch/torch.h>

#include "engine/accelerate/accelerator.hpp"

namespace {

namespace sa = stratagem::accelerate;

struct Data : torch::data::Dataset<Data> {
  Data(std::size_t n, std::uint64_t salt) : n_(n), salt_(salt) {}
  torch::data::Example<> get(size_t i) override {
    auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(i) * 7919 + salt_);
    auto x = at::randn({8}, gen);
    return {x, (x.slice(0, 0, 4).sum() - x.slice(0, 4, 8).sum()).reshape({1})};
  }
  torch::optional<size_t> size() const override { return n_; }
  std::size_t n_;
  std::uint64_t salt_;
};

// Samples trained on, carried through checkpoints by register_for_checkpointing.
struct Counter : sa::Checkpointable {
  std::int64_t seen = 0;
  void save(torch::serialize::OutputArchive& a) const override {
    a.write("seen", torch::tensor(seen));
  }
  void load(torch::serialize::InputArchive& a) override {
    at::Tensor t;
    a.read("seen", t);
    seen = t.item<std::int64_t>();
  }
};

torch::nn::Sequential make_net() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::Tanh(),
                               torch::nn::Linear(32, 32), torch::nn::Tanh(),
                               torch::nn::Linear(32, 1));
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> f;
  for (int i = 1; i + 1 < argc; i += 2) f[argv[i]] = argv[i + 1];
  auto num = [&](const char* k, double d) { return f.count(k) ? std::stod(f[k]) : d; };
  auto str = [&](const char* k, const char* d) { return f.count(k) ? f[k] : std::string(d); };
  const int epochs = static_cast<int>(num("--epochs", 2));
  const auto batch = static_cast<std::int64_t>(num("--batch", 16));
  const double clip = num("--clip", 0), clip_value = num("--clip_value", 0);
  const int no_sync_every = static_cast<int>(num("--no_sync_every", 0));
  const std::string sched_on = str("--sched", "original"), mistake = str("--mistake", "");

  sa::Accelerator acc;
  auto net = make_net();
  auto sgd = std::make_shared<torch::optim::SGD>(net->parameters(),
                                                 torch::optim::SGDOptions(0.05).momentum(0.9));
  auto train = sa::make_data_loader(
      Data(static_cast<std::size_t>(num("--train", 480)), 3),
      {.batch_size = batch, .shuffle = true, .seed = 7});
  auto eval = sa::make_data_loader(Data(static_cast<std::size_t>(num("--eval", 201)), 11),
                                   {.batch_size = batch});
  if (f.count("--eval_first")) acc.prepare_data_loader(*eval, "eval");
  auto [model, opt] = acc.prepare(net, sgd);
  acc.prepare_data_loader(*train, "train");
  if (!f.count("--eval_first")) acc.prepare_data_loader(*eval, "eval");
  if (mistake == "prepare_twice") acc.prepare_data_loader(*train);
  std::shared_ptr<sa::AcceleratedScheduler> sched;
  if (sched_on != "none") {
    torch::optim::Optimizer& on =
        sched_on == "original" ? static_cast<torch::optim::Optimizer&>(*sgd) : *opt;
    sched = acc.prepare_scheduler(std::make_shared<torch::optim::StepLR>(on, 10, 0.5));
  }
  Counter counter;
  acc.register_for_checkpointing(counter);
  if (f.count("--resume")) acc.load_state(f["--resume"]);
  if (f.count("--log_dir")) acc.init_trackers("loop", {{"batch", batch}, {"clip", clip}});

  const auto save_at = static_cast<std::int64_t>(num("--save_at", -1));
  const auto inf_step = static_cast<std::int64_t>(num("--inf_step", -1));
  for (std::int64_t epoch = train->epoch(); epoch < epochs; ++epoch) {
    int i = 0;
    for (auto& b : *train) {
      at::Tensor loss;
      double norm = 0;
      {
        auto guard = acc.accumulate(model);
        std::optional<sa::NoSyncGuard> quiet;
        if (no_sync_every > 0 && ++i % no_sync_every != 0) quiet.emplace(acc);
        loss = torch::mse_loss(model->forward(b.data), b.target);
        if (acc.optimizer_steps() == inf_step && acc.process_index() == 0) {
          loss = loss * std::numeric_limits<float>::infinity();
        }
        if (mistake == "plain_backward") {
          loss.backward();
        } else {
          acc.backward(loss);
        }
        counter.seen += b.data.size(0);
        if (clip > 0 && acc.sync_gradients()) norm = acc.clip_grad_norm_(clip);
        if (clip_value > 0 && acc.sync_gradients()) acc.clip_grad_value_(clip_value);
        const auto before = acc.optimizer_steps();
        if (mistake == "original_step") {
          sgd->step();
        } else {
          opt->step();
        }
        if (sched) sched->step();
        opt->zero_grad();
        if (acc.optimizer_steps() == before) continue;
      }
      const double lr = opt->param_groups()[0].options().get_lr();
      char line[160];
      std::snprintf(line, sizeof line, "step %lld loss %.9f lr %.9g norm %.9f skipped %d",
                    static_cast<long long>(acc.optimizer_steps()), loss.item<double>(), lr, norm,
                    acc.optimizer_step_was_skipped() ? 1 : 0);
      acc.print(line);
      if (f.count("--log_dir")) acc.log({{"loss", loss.item<double>()}, {"lr", lr}},
                                        acc.optimizer_steps());
      if (acc.optimizer_steps() == save_at) {
        acc.save_state(f["--save_dir"]);
        if (f.count("--die_after_save") && acc.is_main_process()) std::raise(SIGKILL);
      }
    }
    // Evaluation: every sample exactly once, whatever the padding.
    torch::NoGradGuard no_grad;
    auto fp32 = acc.autocast(false);
    std::int64_t rows = 0;
    double sum = 0;
    for (auto& b : *eval) {
      const at::Tensor out = acc.gather_for_metrics(model->forward(b.data));
      rows += out.size(0);
      sum += out.sum().item<double>();
    }
    char line[96];
    std::snprintf(line, sizeof line, "eval rows %lld sum %.6f", static_cast<long long>(rows), sum);
    acc.print(line);
  }
  acc.print("seen ", counter.seen);
  if (f.count("--out") && acc.is_main_process()) {
    std::ofstream out(f["--out"], std::ios::binary);
    for (const auto& [name, t] : acc.get_state_dict()) {
      auto c = t.to(torch::kFloat).contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    }
  } else if (f.count("--out")) {
    (void)acc.get_state_dict();  // collective
  }
  if (f.count("--free_memory")) {
    // Another round on the same model, as after a batch-size search.
    acc.free_memory();
    auto again = std::make_shared<torch::optim::SGD>(net->parameters(),
                                                     torch::optim::SGDOptions(0.01));
    auto loader = sa::make_data_loader(Data(64, 5), {.batch_size = batch});
    auto [m2, o2, l2] = acc.prepare(net, again, loader);
    for (auto& b : *l2) {
      o2->zero_grad();
      acc.backward(torch::mse_loss(m2->forward(b.data), b.target));
      o2->step();
    }
    acc.print("re-prepared: ", acc.optimizer_steps(), " steps");
  }
  acc.end_training();
  acc.print("done");
  return 0;
}
