// A small BERT-like encoder (token + position embeddings, two post-norm encoder layers of
// self-attention and a GELU MLP, mean pooling, a linear classifier) on a synthetic task: does
// a sequence of 16 tokens hold more "high" tokens (id >= 32) than low ones? The strategy comes
// from the launcher, so the same binary trains with DDP, ZeRO-2 and FSDP:
//
//   stratagem launch --num_processes 2 --cpu -- ./build/examples/text_classifier
//   stratagem launch --num_processes 2 --cpu --zero_stage 2 -- ./build/examples/text_classifier
//   stratagem launch --num_processes 2 --cpu --use_fsdp
//       --fsdp_transformer_layer_cls_to_wrap EncoderLayer -- ./build/examples/text_classifier
//   (one command each; the last is wrapped here)
//
// Arguments: [steps (default 60)] [trace.json] [scenario.json]
#include <cstdio>
#include <string>

#include <torch/torch.h>

#include <stratagem/accelerate.hpp>

namespace {

constexpr std::int64_t kVocab = 64, kSeq = 16, kHidden = 32, kHeads = 4, kLayers = 2;

struct EncoderLayerImpl : torch::nn::Module {
  EncoderLayerImpl()
      : attn(register_module("attn", torch::nn::MultiheadAttention(
                                         torch::nn::MultiheadAttentionOptions(kHidden, kHeads)))),
        norm1(
            register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kHidden})))),
        fc1(register_module("fc1", torch::nn::Linear(kHidden, 4 * kHidden))),
        fc2(register_module("fc2", torch::nn::Linear(4 * kHidden, kHidden))),
        norm2(register_module("norm2",
                              torch::nn::LayerNorm(torch::nn::LayerNormOptions({kHidden})))) {}
  torch::Tensor forward(torch::Tensor x) {  // [seq, batch, hidden]
    auto a = std::get<0>(attn->forward(x, x, x));
    x = norm1->forward(x + a);
    return norm2->forward(x + fc2->forward(torch::gelu(fc1->forward(x))));
  }
  torch::nn::MultiheadAttention attn;
  torch::nn::LayerNorm norm1;
  torch::nn::Linear fc1, fc2;
  torch::nn::LayerNorm norm2;
};
TORCH_MODULE(EncoderLayer);

struct TextClassifierImpl : torch::nn::Module {
  TextClassifierImpl()
      : tokens(register_module("tokens", torch::nn::Embedding(kVocab, kHidden))),
        positions(register_module("positions", torch::nn::Embedding(kSeq, kHidden))),
        layers(register_module("layers", torch::nn::Sequential())),
        classifier(register_module("classifier", torch::nn::Linear(kHidden, 2))) {
    for (int i = 0; i < kLayers; ++i) layers->push_back(EncoderLayer());
  }
  torch::Tensor forward(torch::Tensor ids) {  // [batch, seq]
    auto pos = torch::arange(kSeq, ids.options());
    auto x = (tokens->forward(ids) + positions->forward(pos)).transpose(0, 1);
    x = layers->forward(x);  // a Sequential: FULL_SHARD gathers and frees each layer in turn
    return classifier->forward(x.mean(0));
  }
  torch::nn::Embedding tokens, positions;
  torch::nn::Sequential layers;
  torch::nn::Linear classifier;
};
TORCH_MODULE(TextClassifier);

struct SyntheticText : torch::data::Dataset<SyntheticText> {
  torch::data::Example<> get(size_t i) override {
    auto gen = at::detail::createCPUGenerator(1000003 * static_cast<std::uint64_t>(i) + 7);
    auto ids = at::randint(0, kVocab, {kSeq}, gen, torch::kLong);
    auto label = ((ids >= kVocab / 2).sum() * 2 > kSeq).to(torch::kLong);
    return {ids, label};
  }
  torch::optional<size_t> size() const override { return 4096; }
};

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 60;
  stratagem::accelerate::Accelerator acc;
  torch::manual_seed(0);
  TextClassifier model;
  auto adamw = std::make_shared<torch::optim::AdamW>(
      model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.01));
  auto data =
      stratagem::accelerate::make_data_loader(SyntheticText(), {.batch_size = 32, .shuffle = true});
  auto [net, optimizer, loader] = acc.prepare(model, adamw, data);

  int step = 0;
  double correct = 0, seen = 0;
  while (step < steps) {
    for (auto& batch : *loader) {
      auto guard = acc.accumulate(net);
      optimizer->zero_grad();
      auto logits = net->forward(batch.data.to(acc.device()));
      auto target = batch.target.to(acc.device());
      auto loss = torch::nn::functional::cross_entropy(logits, target);
      acc.backward(loss);
      optimizer->step();
      // Accuracy over every process's predictions of this batch.
      auto hits = acc.gather((logits.argmax(1) == target).to(torch::kFloat).detach());
      correct += hits.sum().item<double>();
      seen += static_cast<double>(hits.numel());
      const bool stepped = acc.optimizer_steps() > step;
      step = static_cast<int>(acc.optimizer_steps());
      if (stepped && step % 20 == 0) {
        char line[128];
        std::snprintf(line, sizeof line, "step %d loss %.4f accuracy %.3f (%s, %d processes)", step,
                      acc.reduce(loss.detach(), "mean").item<double>(), correct / seen,
                      stratagem::scenario::to_string(acc.options().sharding), acc.num_processes());
        acc.print(line);
        correct = seen = 0;
      }
      if (step >= steps) break;
    }
  }
  if (argc > 2) acc.save_trace(argv[2]);
  if (argc > 3) acc.export_scenario(argv[3]);
  return 0;
}
