// A user's own LibTorch program built against the installed Stratagem package
// (examples/user_project/CMakeLists.txt, docs/accelerator.md "Your project"): an MLP
// regression on its own dataset, AdamW, two epochs, a held-out error. Run alone it is one
// process; `stratagem launch --num_processes 2 --cpu -- ./train` runs it data-parallel.
#include <cstdio>

#include <torch/torch.h>

#include <stratagem/accelerate.hpp>

// y = sum(x) + noise-free sin(x0): sample i is the same on every process.
struct Samples : torch::data::Dataset<Samples> {
  explicit Samples(std::size_t n, std::uint64_t offset = 0) : n_(n), offset_(offset) {}
  torch::data::Example<> get(std::size_t i) override {
    auto gen = at::detail::createCPUGenerator(offset_ + i + 1);
    auto x = at::randn({8}, gen);
    return {x, (x.sum() + x[0].sin()).unsqueeze(0)};
  }
  torch::optional<std::size_t> size() const override { return n_; }
  std::size_t n_;
  std::uint64_t offset_;
};

int main() {
  stratagem::accelerate::Accelerator accelerator;
  torch::manual_seed(0);
  auto net = torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::ReLU(),
                                   torch::nn::Linear(32, 1));
  auto optimizer = std::make_shared<torch::optim::AdamW>(net->parameters(),
                                                         torch::optim::AdamWOptions(1e-2));
  auto train = stratagem::accelerate::make_data_loader(Samples(512), {.batch_size = 16});
  auto held_out = stratagem::accelerate::make_data_loader(Samples(128, 10000), {.batch_size = 16});

  auto [model, opt, loader] = accelerator.prepare(net, optimizer, train);
  accelerator.prepare_data_loader(*held_out);

  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& batch : *loader) {
      opt->zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      opt->step();
    }
    torch::NoGradGuard no_grad;
    double error = 0;
    for (auto& batch : *held_out) {
      error += torch::mse_loss(model->forward(batch.data), batch.target).item<double>();
    }
    error = accelerator.reduce(torch::tensor(error / held_out->size()), "mean").item<double>();
    char line[80];
    std::snprintf(line, sizeof line, "epoch %d held-out mse %.4f (%d processes)", epoch + 1, error,
                  accelerator.num_processes());
    accelerator.print(line);
  }
  return 0;
}
