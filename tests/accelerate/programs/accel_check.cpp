// The training program the accelerate tests launch: a small MLP of named blocks (so DDP has
// several buckets and FSDP several units) on deterministic data, Adam, a fixed number of
// optimizer steps. Flags:
//   --steps N --batch B --out params.bin (main process writes the final parameters, fp32)
//   --trace result.json --export scenario.json --save_dir D --save_at S --resume D
//   --throw_rank R --throw_step S (fault injection) --inf_step S (an inf loss on rank 0)
//   --seq 1 (the blocks in a torch::nn::Sequential)
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "engine/accelerate/accelerator.hpp"

namespace {

struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : fc(register_module("fc", torch::nn::Linear(32, 32))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({32})))) {}
  torch::Tensor forward(torch::Tensor x) { return norm->forward(x + torch::tanh(fc->forward(x))); }
  torch::nn::Linear fc;
  torch::nn::LayerNorm norm;
};
TORCH_MODULE(Block);

// Three blocks as members (`seq` false) or in a torch::nn::Sequential (FSDP can then free
// them during the forward); the same parameters in the same order either way.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(bool seq = false) : stem(register_module("stem", torch::nn::Linear(8, 32))) {
    if (seq) {
      for (int i = 0; i < 3; ++i) blocks->push_back(Block());
      register_module("blocks", blocks);
    } else {
      b1 = register_module("b1", Block());
      b2 = register_module("b2", Block());
      b3 = register_module("b3", Block());
    }
    head = register_module("head", torch::nn::Linear(32, 4));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = stem->forward(x);
    x = blocks->size() > 0 ? blocks->forward(x) : b3->forward(b2->forward(b1->forward(x)));
    return head->forward(x);
  }
  torch::nn::Linear stem;
  Block b1{nullptr}, b2{nullptr}, b3{nullptr};
  torch::nn::Sequential blocks;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Net);

struct Data : torch::data::Dataset<Data> {
  torch::data::Example<> get(size_t i) override {
    auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(i) * 7919 + 3);
    auto x = at::randn({8}, gen);
    auto y = (x.slice(0, 0, 4) * 2 - x.slice(0, 4, 8)).argmax();
    return {x, y};
  }
  torch::optional<size_t> size() const override { return 512; }
};

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  auto num = [&](const char* k, long long d) { return flags.count(k) ? std::stoll(flags[k]) : d; };
  const long long steps = num("--steps", 5), batch = num("--batch", 16);
  const long long throw_rank = num("--throw_rank", -1), throw_step = num("--throw_step", -1);
  const long long inf_step = num("--inf_step", -1), save_at = num("--save_at", -1);

  stratagem::accelerate::Accelerator acc;
  torch::manual_seed(0);
  if (flags.count("--pipeline")) {
    // A Sequential split into stages; losses per step are what the test compares.
    torch::nn::Sequential seq(
        torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32), torch::nn::Tanh(),
        torch::nn::Linear(32, 32), torch::nn::Tanh(), torch::nn::Linear(32, 4));
    auto adam =
        std::make_shared<torch::optim::Adam>(seq->parameters(), torch::optim::AdamOptions(1e-3));
    auto data = stratagem::accelerate::make_data_loader(
        Data(), {.batch_size = batch, .shuffle = true, .seed = 7});
    auto [model, optimizer, loader] = acc.prepare_pipeline(seq, adam, data);
    auto ce = [&](const at::Tensor& out, const at::Tensor& y) {
      auto loss = torch::nn::functional::cross_entropy(out, y);
      if (acc.optimizer_steps() == inf_step) loss = loss * std::numeric_limits<float>::infinity();
      return loss;
    };
    for (auto& b : *loader) {
      optimizer->zero_grad();
      const double loss = acc.train_batch(b.data, b.target, ce);
      const auto before = acc.optimizer_steps();
      optimizer->step();
      if (acc.optimizer_step_was_skipped()) {
        acc.print("skipped step ", before, " (loss scale now ", acc.loss_scale(), ")");
      }
      char line[64];
      std::snprintf(line, sizeof line, "step %lld loss %.9f",
                    static_cast<long long>(acc.optimizer_steps()), loss);
      acc.print(line);
      if (acc.optimizer_steps() >= steps) break;
    }
    if (flags.count("--trace")) acc.save_trace(flags["--trace"]);
    if (flags.count("--export")) acc.export_scenario(flags["--export"]);
    acc.print("done");
    return 0;
  }
  Net model(flags.count("--seq") > 0);
  auto adam =
      std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto data = stratagem::accelerate::make_data_loader(
      Data(), {.batch_size = batch, .shuffle = true, .seed = 7});
  auto [net, optimizer, loader] = acc.prepare(model, adam, data);
  // An evaluation loader prepared after the training one, read a little every step: its
  // position must not stand in for the training loader's in a checkpoint.
  std::shared_ptr<stratagem::accelerate::DataLoader<Data>> eval;
  if (flags.count("--eval_loader")) {
    eval = stratagem::accelerate::make_data_loader(Data(), {.batch_size = batch, .seed = 3});
    acc.prepare_data_loader(*eval);
  }
  if (flags.count("--resume")) acc.load_state(flags["--resume"]);

  while (acc.optimizer_steps() < steps) {
    for (auto& b : *loader) {
      auto guard = acc.accumulate(net);
      optimizer->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(b.data.to(acc.device())),
                                                       b.target.to(acc.device()));
      if (acc.optimizer_steps() == inf_step && acc.process_index() == 0) {
        loss = loss * std::numeric_limits<float>::infinity();
      }
      acc.backward(loss);
      const auto before = acc.optimizer_steps();
      optimizer->step();
      if (acc.optimizer_steps() > before) {
        if (acc.optimizer_step_was_skipped()) {
          acc.print("skipped step ", before, " (loss scale now ", acc.loss_scale(), ")");
        }
        acc.print("step ", acc.optimizer_steps(), " loss ", loss.item<double>());
        if (acc.process_index() == throw_rank && acc.optimizer_steps() == throw_step) {
          throw std::runtime_error("injected failure at step " + std::to_string(throw_step));
        }
        if (eval) {
          // Two evaluation batches per step; the loop restarts its epoch each time.
          int seen = 0;
          for (auto& e : *eval) {
            (void)e;
            if (++seen == 2) break;
          }
        }
        if (acc.optimizer_steps() == save_at) acc.save_state(flags["--save_dir"]);
      }
      if (acc.optimizer_steps() >= steps) break;
    }
  }
  if (flags.count("--out") && acc.is_main_process()) {
    std::ofstream out(flags["--out"], std::ios::binary);
    for (const auto& p : net->parameters()) {
      auto c = p.detach().to(torch::kCPU, torch::kFloat).contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    }
  }
  if (flags.count("--trace")) acc.save_trace(flags["--trace"]);
  if (flags.count("--export")) acc.export_scenario(flags["--export"]);
  acc.print("done");
  return 0;
}
