// The real runtime's own cost (issue #4, Performance): one training step of the plan executor
// against a plain single-process LibTorch loop of the same model, batch, micro-batches and
// AdamW, both on one thread. The plain loop is what a user would write with torch::nn:
// one autograd graph per micro-batch, loss.backward(), optimizer.step(). The executor runs the
// same math unit by unit on detached boundaries, from the plan's ops, recording every op's
// span and the memory per tensor class. Overhead = executor / plain − 1 (target ≤ 5 %).
// BM_ExecutorStepTp runs the same step with Megatron tensor + sequence parallelism over two
// ranks (threads over the in-process communicator, one LibTorch thread each): its time
// against BM_ExecutorStep is what TP's slicing, collectives and graph cuts cost or save on
// two cores (ideal: half the compute each, plus the collectives).
//
//   ./build/bench/stratagem_bench_runtime --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/inproc_communicator.hpp"
#include "engine/plan/builder.hpp"
#include "engine/runtime/data.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/threads.hpp"
#include "engine/scenario/scenario.hpp"

namespace {

using namespace stratagem;

// The validation model on one process: scenarios/validate-cpu-ddp.json with dp 1 (4
// micro-batches of 4 sequences of 128 tokens).
scenario::Scenario bench_scenario() {
  scenario::Scenario s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                                 "/scenarios/validate-cpu-ddp.json");
  s.strategy.dp = 1;
  s.strategy.grad_accum = 4;
  s.cluster.gpus_per_node = 1;
  return s;
}

// ---- the plain LibTorch GPT --------------------------------------------------------------
struct BlockImpl : torch::nn::Module {
  BlockImpl(std::int64_t h, std::int64_t heads, std::int64_t ffn)
      : heads(heads),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})))),
        qkv(register_module("qkv", torch::nn::Linear(h, 3 * h))),
        proj(register_module("proj", torch::nn::Linear(h, h))),
        up(register_module("up", torch::nn::Linear(h, ffn))),
        down(register_module("down", torch::nn::Linear(ffn, h))) {}

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    const auto b = x.size(0), s = x.size(1), h = x.size(2), d = h / heads;
    auto parts = qkv(ln1(x)).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    auto q = split(parts[0]), k = split(parts[1]), v = split(parts[2]);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto att = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({b, s, h});
    auto y = x + proj(att);
    return y + down(torch::gelu(up(ln2(y)), "tanh"));
  }

  std::int64_t heads;
  torch::nn::LayerNorm ln1, ln2;
  torch::nn::Linear qkv, proj, up, down;
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  explicit GptImpl(const scenario::ModelSpec& m)
      : wte(register_module("wte", torch::nn::Embedding(m.vocab, m.hidden))),
        wpe(register_module("wpe", torch::nn::Embedding(m.max_positions, m.hidden))),
        lnf(register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({m.hidden})))),
        head(register_module(
            "head", torch::nn::Linear(torch::nn::LinearOptions(m.hidden, m.vocab).bias(false)))) {
    for (std::int64_t l = 0; l < m.layers; ++l) {
      blocks.push_back(
          register_module("block" + std::to_string(l), Block(m.hidden, m.heads, m.ffn_hidden)));
    }
  }

  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets) {
    const auto s = tokens.size(1);
    auto mask = torch::ones({s, s}, torch::kBool).triu(1);
    auto x = wte(tokens) + wpe(torch::arange(s));
    for (auto& b : blocks) x = b->forward(x, mask);
    auto logits = head(lnf(x));
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}),
                                                targets.reshape({-1}));
  }

  torch::nn::Embedding wte, wpe;
  torch::nn::LayerNorm lnf;
  torch::nn::Linear head;
  std::vector<Block> blocks;
};
TORCH_MODULE(Gpt);

void set_counters(benchmark::State& state, const scenario::Scenario& s) {
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(s.tokens_per_step()),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void BM_PlainLibTorchLoop(benchmark::State& state) {
  runtime::set_cpu_threads(1);
  torch::manual_seed(1);
  const scenario::Scenario s = bench_scenario();
  Gpt model(s.model);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  const std::int64_t mb = s.strategy.micro_batch_size, seq = s.training.seq_len;
  const int m = s.strategy.grad_accum;
  for (auto _ : state) {
    opt.zero_grad();
    for (int i = 0; i < m; ++i) {
      auto tokens = torch::randint(s.model.vocab, {mb, seq + 1}, torch::kLong);
      auto loss = model->forward(tokens.narrow(1, 0, seq), tokens.narrow(1, 1, seq)) / m;
      loss.backward();
    }
    opt.step();
  }
  set_counters(state, s);
}
BENCHMARK(BM_PlainLibTorchLoop)->Unit(benchmark::kMillisecond)->MinTime(5.0);

void BM_ExecutorStep(benchmark::State& state) {
  runtime::set_cpu_threads(1);
  const scenario::Scenario s = bench_scenario();
  const plan::StepPlan plan = plan::build_plan(s, {.fold = false});
  auto comms = comm::make_inproc_world(1, std::chrono::seconds(60));
  const auto data = runtime::make_synthetic_data(s.model.vocab, 1);
  runtime::ExecutorOptions options;
  runtime::Executor executor(plan, 0, *comms[0], *data, options, c10::Device(c10::kCPU));
  std::int64_t step = 0;
  for (auto _ : state) benchmark::DoNotOptimize(executor.step(step++).loss_sum);
  set_counters(state, s);
}
BENCHMARK(BM_ExecutorStep)->Unit(benchmark::kMillisecond)->MinTime(5.0);

void BM_ExecutorStepTp(benchmark::State& state) {
  scenario::Scenario s = bench_scenario();
  s.strategy.tp = 2;
  s.strategy.sequence_parallel = true;
  s.cluster.gpus_per_node = 2;
  const plan::StepPlan plan = plan::build_plan(s, {.fold = false});
  auto comms = comm::make_inproc_world(2, std::chrono::seconds(60));
  const auto data = runtime::make_synthetic_data(s.model.vocab, 1);
  std::vector<std::unique_ptr<runtime::Executor>> executors;
  for (int r = 0; r < 2; ++r) {
    executors.push_back(std::make_unique<runtime::Executor>(
        plan, r, *comms[r], *data, runtime::ExecutorOptions{}, c10::Device(c10::kCPU)));
  }
  runtime::set_cpu_threads(1);
  std::int64_t step = 0;
  for (auto _ : state) {
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        benchmark::DoNotOptimize(executors[r]->step(step).loss_sum);
      });
    }
    for (auto& t : ranks) t.join();
    ++step;
  }
  set_counters(state, s);
}
BENCHMARK(BM_ExecutorStepTp)->Unit(benchmark::kMillisecond)->MinTime(5.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
