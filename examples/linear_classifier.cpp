// The seed notes' DiyModel as a LibTorch program: a Linear(10, 2) classifier over random data,
// three epochs of Adam. It was a single-process program; the lines marked "+" changed (the
// docs/accelerator.md shows the whole diff) and it runs on any number of processes with `stratagem launch`:
//
//   ./build/examples/linear_classifier                                   # one process
//   ./build/apps/stratagem launch --num_processes 2 --cpu -- ./build/examples/linear_classifier
//   ./build/apps/stratagem launch --num_processes 2 --cpu --mixed_precision bf16 --
//       ./build/examples/linear_classifier
#include <cstdio>
#include <string>

#include <torch/torch.h>

#include <stratagem/accelerate.hpp>

struct DiyModelImpl : torch::nn::Module {
  DiyModelImpl() : fc(register_module("fc", torch::nn::Linear(10, 2))) {}  // binary classifier
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(DiyModel);

// 1000 samples of random features and labels; sample i is the same on every process.
struct DiyDataset : torch::data::Dataset<DiyDataset> {
  torch::data::Example<> get(size_t i) override {
    auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(i) + 1);
    auto x = at::randn({10}, gen);
    auto y = at::randint(0, 2, {}, gen, torch::kLong);
    return {x, y};
  }
  torch::optional<size_t> size() const override { return 1000; }
};

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 3;
  stratagem::accelerate::Accelerator accelerator;  // + reads the launcher's configuration
  torch::manual_seed(0);
  DiyModel model;
  auto optimizer =
      std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto dataloader =
      stratagem::accelerate::make_data_loader(DiyDataset(), {.batch_size = 32, .shuffle = true});
  torch::nn::CrossEntropyLoss criterion;

  auto [net, opt, loader] = accelerator.prepare(model, optimizer, dataloader);  // +

  model->train();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total_loss = 0;
    for (auto& batch : *loader) {
      opt->zero_grad();
      auto outputs = net->forward(batch.data.to(accelerator.device()));
      auto loss = criterion(outputs, batch.target.to(accelerator.device()));
      accelerator.backward(loss);  // + replaces loss.backward()
      opt->step();
      total_loss += loss.item<double>();
    }
    const double avg =
        accelerator.reduce(torch::tensor(total_loss / loader->size()), "mean").item<double>();
    char line[64];
    std::snprintf(line, sizeof line, "Epoch %d, Loss: %.4f", epoch + 1, avg);
    accelerator.print(line);
  }
  if (const char* trace = std::getenv("STRATAGEM_TRACE_OUT")) accelerator.save_trace(trace);
  return 0;
}
