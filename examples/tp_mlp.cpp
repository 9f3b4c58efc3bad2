// Tensor parallelism for your own model with the Accelerator: the MLP blocks' two layers are
// declared as stratagem::accelerate::ParallelLinear (a drop-in for torch::nn::Linear) and a
// tensor-parallel plan, as PyTorch's parallelize_module takes one, says which are split by
// output rows (colwise) and which by input columns (rowwise). Everything else is the usual
// Accelerate loop. Run it on 4 CPU processes, TP groups of 2 and data parallelism over them:
//
//   ./build/apps/stratagem launch --num_processes 4 --cpu --tp_size 2 -- ./build/examples/tp_mlp
//
// Flags: --steps N (default 20), --batch B (global per step, default 16), --out params.bin
// (the main process writes the whole model's parameters, fp32, in named_parameters order),
// --save_dir D (save_state at the end: each process's TP slices), --resume D (load_state),
// --plan missing | plain (a deliberately wrong plan, for the tests).
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <torch/torch.h>

#include <stratagem/accelerate.hpp>

namespace acc = stratagem::accelerate;

namespace {

// A pre-norm residual MLP block: fc_in column-parallel, fc_out row-parallel (Megatron's MLP).
struct BlockImpl : torch::nn::Module {
  BlockImpl(std::int64_t h, std::int64_t f)
      : norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})))),
        fc_in(register_module("fc_in", acc::ParallelLinear(h, f))),
        fc_out(register_module("fc_out", acc::ParallelLinear(f, h))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return x + fc_out->forward(torch::gelu(fc_in->forward(norm->forward(x))));
  }
  torch::nn::LayerNorm norm;
  acc::ParallelLinear fc_in, fc_out;
};
TORCH_MODULE(Block);

struct NetImpl : torch::nn::Module {
  NetImpl()
      : embed(register_module("embed", torch::nn::Linear(8, 32))),
        block0(register_module("block0", Block(32, 128))),
        block1(register_module("block1", Block(32, 128))),
        head(register_module("head", torch::nn::Linear(32, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return head->forward(block1->forward(block0->forward(embed->forward(x))));
  }
  torch::nn::Linear embed;
  Block block0, block1;
  torch::nn::Linear head;
};
TORCH_MODULE(Net);

// Four classes from eight features, deterministic per sample index.
struct Data : torch::data::Dataset<Data> {
  torch::data::Example<> get(size_t i) override {
    auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(i) * 7919 + 3);
    auto x = at::randn({8}, gen);
    return {x, (x.slice(0, 0, 4) * 2 - x.slice(0, 4, 8)).argmax()};
  }
  torch::optional<size_t> size() const override { return 1024; }
};

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  const long long steps = flags.count("--steps") ? std::stoll(flags["--steps"]) : 20;
  const long long batch = flags.count("--batch") ? std::stoll(flags["--batch"]) : 16;

  auto options = acc::AcceleratorOptions::from_env();  // --tp_size from `stratagem launch`
  options.tp_plan = {{"block0.fc_in", acc::TpStyle::colwise},
                     {"block0.fc_out", acc::TpStyle::rowwise},
                     {"block1.fc_in", acc::TpStyle::colwise},
                     {"block1.fc_out", acc::TpStyle::rowwise}};
  if (flags["--plan"] == "missing") options.tp_plan.push_back({"block2.fc_in", acc::TpStyle::colwise});
  if (flags["--plan"] == "plain") options.tp_plan.push_back({"head", acc::TpStyle::colwise});
  acc::Accelerator accelerator(options);

  torch::manual_seed(0);
  Net model;
  auto adam = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto data = acc::make_data_loader(Data(), {.batch_size = batch, .shuffle = true, .seed = 7});
  auto [net, optimizer, loader] = accelerator.prepare(model, adam, data);
  if (flags.count("--resume")) accelerator.load_state(flags["--resume"]);

  while (accelerator.optimizer_steps() < steps) {
    for (auto& b : *loader) {
      optimizer->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(b.data.to(accelerator.device())),
                                                       b.target.to(accelerator.device()));
      accelerator.backward(loss);
      optimizer->step();
      if (accelerator.optimizer_steps() % 5 == 0) {
        char line[64];
        std::snprintf(line, sizeof line, "step %lld loss %.6f",
                      static_cast<long long>(accelerator.optimizer_steps()), loss.item<double>());
        accelerator.print(line);
      }
      if (accelerator.optimizer_steps() >= steps) break;
    }
  }
  if (flags.count("--save_dir")) accelerator.save_state(flags["--save_dir"]);
  const auto weights = accelerator.get_state_dict();  // collective: whole TP layers
  if (flags.count("--out") && accelerator.is_main_process()) {
    std::ofstream out(flags["--out"], std::ios::binary);
    for (const auto& [name, t] : weights) {
      auto c = t.to(torch::kFloat).contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    }
  }
  accelerator.print("done");
  return 0;
}
