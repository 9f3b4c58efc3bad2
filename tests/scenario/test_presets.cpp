// Presets as data: every model's parameter count against its published size, the GPU and
// cluster figures against their datasheets, and every preset parses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/scenario/cluster.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::scenario {
namespace {

ModelSpec model(const std::string& name) {
  return parse_model(resolve_preset(PresetKind::model, name, "model"), "model");
}

GpuSpec gpu(const std::string& name) {
  return parse_gpu(resolve_preset(PresetKind::gpu, name, "gpu"), "gpu");
}

ClusterSpec cluster(const std::string& name) {
  return parse_cluster(resolve_preset(PresetKind::cluster, name, "cluster"), "cluster");
}

// Counts HF transformers reports for the model's trainable parameters (sum of numel over
// model.parameters(); BERT: BertModel with its pooler). Exact, so any change to the formulas
// or the shapes shows.
TEST(Presets, ParameterCountsMatchPublishedExactly) {
  EXPECT_EQ(total_params(model("gpt2")), 124'439'808.0);
  EXPECT_EQ(total_params(model("gpt2-medium")), 354'823'168.0);
  EXPECT_EQ(total_params(model("gpt2-large")), 774'030'080.0);
  EXPECT_EQ(total_params(model("gpt2-xl")), 1'557'611'200.0);
  EXPECT_EQ(total_params(model("llama2-7b")), 6'738'415'616.0);
  EXPECT_EQ(total_params(model("llama2-13b")), 13'015'864'320.0);
  EXPECT_EQ(total_params(model("llama2-70b")), 68'976'648'192.0);
  EXPECT_EQ(total_params(model("llama3-8b")), 8'030'261'248.0);
  EXPECT_EQ(total_params(model("llama3-70b")), 70'553'706'496.0);
  EXPECT_EQ(total_params(model("bert-base")), 109'482'240.0);
  EXPECT_EQ(total_params(model("bert-large")), 335'141'888.0);
}

// The sizes model cards quote (Llama 2 paper; Meta's Llama 3 card: 8.03B, 70.6B), to 1%.
TEST(Presets, ParameterCountsWithinOnePercentOfQuotedSizes) {
  const std::pair<const char*, double> quoted[] = {
      {"llama2-7b", 6.74e9},  {"llama2-13b", 13.0e9}, {"llama2-70b", 69.0e9},
      {"llama3-8b", 8.03e9},  {"llama3-70b", 70.6e9}, {"gpt3-6.7b", 6.7e9},
      {"gpt3-175b", 174.6e9}, {"gpt2-xl", 1.558e9},   {"bert-large", 335e6},
  };
  for (const auto& [name, size] : quoted) {
    EXPECT_NEAR(total_params(model(name)) / size, 1.0, 0.01) << name;
  }
}

// Megatron-LM eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)). It counts the blocks
// (12h² + 13h each), the token and position embeddings, and leaves out the final layer norm
// (2h), which total_params includes.
double megatron_params(double l, double h, double v, double s) {
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l * h));
}

TEST(Presets, Gpt3MatchesMegatronFormula) {
  struct Case {
    const char* name;
    double l, h;
  } cases[] = {{"gpt3-1.3b", 24, 2048},
               {"gpt3-2.7b", 32, 2560},
               {"gpt3-6.7b", 32, 4096},
               {"gpt3-13b", 40, 5120},
               {"gpt3-175b", 96, 12288}};
  for (const auto& c : cases) {
    const double expected = megatron_params(c.l, c.h, 50257, 2048) + 2.0 * c.h;
    EXPECT_NEAR(total_params(model(c.name)), expected, expected * 1e-12) << c.name;
  }
  // 174,604,259,328 exactly: 12lh² + 13lh + (V+s)h + 2h.
  EXPECT_EQ(total_params(model("gpt3-175b")), 174'604'259'328.0);
  // With Megatron's padded vocabulary (51200) the formula gives the 174.6B the paper quotes.
  EXPECT_NEAR(megatron_params(96, 12288, 51200, 2048) / 1e9, 174.6, 0.05);
}

// GPT-3's table 2.1 labels are rounded (1.3B, 2.7B, 6.7B to 0.1B; 13B, 175B to 1B); each count
// rounds to its label. (Read as exact numbers, 1.3B, 2.7B and 13B are 1.2%, 1.8% and 1.1% away:
// the labels are names, and 13B's table row prints d_model 5140, which 40 heads of 128 cannot
// make.)
TEST(Presets, Gpt3CountsRoundToTheirPaperLabels) {
  struct Label {
    const char* name;
    double label, unit;
  } labels[] = {{"gpt3-1.3b", 1.3e9, 1e8},
                {"gpt3-2.7b", 2.7e9, 1e8},
                {"gpt3-6.7b", 6.7e9, 1e8},
                {"gpt3-13b", 13e9, 1e9},
                {"gpt3-175b", 175e9, 1e9}};
  for (const auto& l : labels) {
    const double p = total_params(model(l.name));
    EXPECT_EQ(std::round(p / l.unit) * l.unit, l.label) << l.name << " has " << p;
  }
}

TEST(Presets, ModelShapes) {
  const ModelSpec l2 = model("llama2-70b");
  EXPECT_EQ(l2.kv_heads, 8);
  EXPECT_EQ(l2.ffn_hidden, 28672);
  EXPECT_EQ(l2.mlp, MlpKind::swiglu);
  EXPECT_EQ(l2.norm, NormKind::rmsnorm);
  EXPECT_EQ(l2.positions, PositionKind::rotary);
  EXPECT_FALSE(l2.tied_embeddings);
  EXPECT_FALSE(l2.bias);
  EXPECT_EQ(model("llama3-8b").kv_heads, 8);
  EXPECT_EQ(model("llama3-8b").vocab, 128256);
  EXPECT_EQ(model("llama2-7b").kv_heads, 32);
  const ModelSpec bert = model("bert-base");
  EXPECT_EQ(bert.kind, ModelKind::encoder);
  EXPECT_EQ(bert.max_positions, 512);
  EXPECT_EQ(bert.type_vocab, 2);
  EXPECT_TRUE(bert.pooler);
  EXPECT_TRUE(bert.tied_embeddings);
  EXPECT_EQ(model("gpt3-175b").max_positions, 2048);
  EXPECT_EQ(model("gpt3-175b").vocab, 50257);
}

TEST(Presets, BlockBreakdownAddsUp) {
  for (const auto& name : preset_names(PresetKind::model)) {
    const ModelSpec m = model(name);
    const BlockParamsBreakdown b = block_params_breakdown(m);
    EXPECT_EQ(b.attention + b.mlp + b.norms, block_params(m)) << name;
  }
  // Llama 2 7B: 4h² attention, 3·h·f MLP, two RMSNorms of h.
  const BlockParamsBreakdown b = block_params_breakdown(model("llama2-7b"));
  EXPECT_EQ(b.attention, 4.0 * 4096 * 4096);
  EXPECT_EQ(b.mlp, 3.0 * 4096 * 11008);
  EXPECT_EQ(b.norms, 2.0 * 4096);
}

TEST(Presets, RequiredModelsGpusClustersExist) {
  for (const char* name : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-1.3b", "gpt3-2.7b",
                           "gpt3-6.7b", "gpt3-13b", "gpt3-175b", "llama2-7b", "llama2-13b",
                           "llama2-70b", "llama3-8b", "llama3-70b", "bert-base", "bert-large"}) {
    EXPECT_NO_THROW(model(name)) << name;
  }
  for (const char* name :
       {"a100-40gb", "a100-80gb", "h100-80gb", "v100-32gb", "rtx3090", "rtx4090", "l4", "cpu"}) {
    EXPECT_NO_THROW(gpu(name)) << name;
  }
  for (const char* name :
       {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "pcie-workstation-4x4090", "laptop-cpu"}) {
    EXPECT_NO_THROW(cluster(name)) << name;
  }
}

TEST(Presets, EveryEntryHasDescriptionAndSource) {
  for (PresetKind kind : {PresetKind::model, PresetKind::gpu, PresetKind::cluster}) {
    for (const auto& name : preset_names(kind)) {
      const auto& p = preset(kind, name, name);
      EXPECT_TRUE(p.contains("description") && p["description"].is_string()) << name;
      EXPECT_TRUE(p.contains("source") && p["source"].is_string()) << name;
    }
  }
}

TEST(Presets, GpuFiguresFromDatasheets) {
  const double t = units::kTera;
  const GpuSpec a100 = gpu("a100-80gb");
  EXPECT_EQ(a100.peak(DType::bf16), 312 * t);
  EXPECT_EQ(a100.peak(DType::tf32), 156 * t);
  EXPECT_EQ(a100.peak(DType::fp32), 19.5 * t);
  EXPECT_EQ(a100.memory_bytes, 80 * units::kGiB);
  EXPECT_EQ(a100.hbm_bandwidth, 2039 * units::kGB);
  EXPECT_EQ(gpu("a100-40gb").hbm_bandwidth, 1555 * units::kGB);
  EXPECT_EQ(gpu("h100-80gb").peak(DType::bf16), 989.4 * t);
  EXPECT_EQ(gpu("h100-80gb").hbm_bandwidth, 3350 * units::kGB);
  EXPECT_EQ(gpu("v100-32gb").peak(DType::fp16), 125 * t);
  EXPECT_EQ(gpu("rtx3090").peak(DType::fp16), 71 * t);  // FP32 accumulate, dense
  EXPECT_EQ(gpu("rtx4090").peak(DType::bf16), 165.2 * t);
  EXPECT_EQ(gpu("l4").peak(DType::bf16), 121 * t);  // 242 with sparsity, halved
  EXPECT_EQ(gpu("l4").hbm_bandwidth, 300 * units::kGB);
  // Measured on the build host (see the preset's source): one core, LibTorch fp32 matmul.
  const GpuSpec cpu = gpu("cpu");
  EXPECT_EQ(cpu.peak(DType::fp32), 0.12 * t);
  EXPECT_EQ(cpu.peak(DType::bf16), 0.409 * t);
  EXPECT_LT(cpu.kernel_launch_s, 1e-6);
}

TEST(Presets, ClusterLinks) {
  const ClusterSpec a100 = cluster("dgx-a100-80gb");
  EXPECT_EQ(a100.world_size(), 8);
  EXPECT_EQ(a100.gpu.name, "a100-80gb");
  EXPECT_EQ(a100.intra_node.bandwidth, 300 * units::kGB);  // NVLink 3 per direction
  EXPECT_EQ(a100.inter_node.bandwidth, 25 * units::kGB);   // HDR 200 Gb/s per GPU
  EXPECT_EQ(cluster("dgx-a100-40gb").gpu.name, "a100-40gb");
  const ClusterSpec h100 = cluster("dgx-h100");
  EXPECT_EQ(h100.intra_node.bandwidth, 450 * units::kGB);  // NVLink 4
  EXPECT_EQ(h100.inter_node.bandwidth, 50 * units::kGB);   // NDR 400 Gb/s
  const ClusterSpec ws = cluster("pcie-workstation-4x4090");
  EXPECT_EQ(ws.world_size(), 4);
  EXPECT_EQ(ws.intra_node.bandwidth, 25 * units::kGB);  // PCIe Gen4 x16, effective
  const ClusterSpec cpu = cluster("laptop-cpu");
  EXPECT_EQ(cpu.nodes, 1);
  EXPECT_EQ(cpu.gpu.name, "cpu");
  EXPECT_GE(cpu.gpus_per_node, 2);
}

// NCCL's achieved bus bandwidth over each link's line rate (sources in clusters.json):
// NVLink 3 230 of 300 GB/s, NVLink 4 370 of 450, HDR 24 of 25, NDR 47 of 50.
TEST(Presets, LinkEfficienciesAreNcclsBusBandwidthOverTheLineRate) {
  const ClusterSpec a100 = cluster("dgx-a100-80gb");
  EXPECT_DOUBLE_EQ(a100.intra_node.efficiency, 0.767);
  EXPECT_DOUBLE_EQ(a100.inter_node.efficiency, 0.96);
  const ClusterSpec h100 = cluster("dgx-h100");
  EXPECT_DOUBLE_EQ(h100.intra_node.efficiency, 0.822);
  EXPECT_DOUBLE_EQ(h100.inter_node.efficiency, 0.94);
  EXPECT_NEAR(h100.intra_node.effective_bandwidth(), 370 * units::kGB, 0.5 * units::kGB);
  // PCIe figures are already effective ones; the CPU's link was measured.
  EXPECT_EQ(cluster("pcie-workstation-4x4090").intra_node.efficiency, 1.0);
  EXPECT_EQ(cluster("laptop-cpu").intra_node.efficiency, 1.0);
  // Overriding a link's bandwidth keeps the preset's efficiency; a bad one names its path.
  const ClusterSpec faster = parse_cluster(
      resolve_preset(PresetKind::cluster,
                     {{"preset", "dgx-h100"}, {"intra_node", {{"bandwidth_GBps", 900}}}},
                     "cluster"),
      "cluster");
  EXPECT_EQ(faster.intra_node.bandwidth, 900 * units::kGB);
  EXPECT_DOUBLE_EQ(faster.intra_node.efficiency, 0.822);
  try {
    parse_cluster(
        resolve_preset(PresetKind::cluster,
                       {{"preset", "dgx-h100"}, {"inter_node", {{"efficiency", {{"value", 1.5}}}}}},
                       "cluster"),
        "cluster");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "cluster.inter_node.efficiency.value");
  }
  // It survives the JSON round trip of a resolved cluster (results record it).
  EXPECT_DOUBLE_EQ(parse_cluster(to_json(h100), "cluster").intra_node.efficiency, 0.822);
}

TEST(Presets, OverrideKeepsTheRest) {
  const ClusterSpec two = parse_cluster(
      resolve_preset(PresetKind::cluster, {{"preset", "dgx-h100"}, {"nodes", 2}}, "cluster"),
      "cluster");
  EXPECT_EQ(two.world_size(), 16);
  EXPECT_EQ(two.gpu.name, "h100-80gb");
  const ModelSpec wide = parse_model(
      resolve_preset(PresetKind::model, {{"preset", "gpt2"}, {"layers", 24}}, "model"), "model");
  EXPECT_EQ(wide.layers, 24);
  EXPECT_EQ(wide.hidden, 768);
}

// The quick form {"params": P, "layers": l} estimates the shape; heads must divide hidden.
TEST(Presets, QuickFormHasWholeHeads) {
  const ModelSpec q = parse_model({{"params", 7e9}, {"layers", 32}}, "model");
  EXPECT_EQ(q.hidden, 4288);  // sqrt(7e9 / (12 · 32)) = 4269.6, to a multiple of 64
  EXPECT_EQ(q.hidden % q.heads, 0);
  EXPECT_EQ(q.hidden / q.heads, 64);
  EXPECT_EQ(total_params(q), 7e9);
  const ModelSpec r = parse_model({{"params", 7e9}, {"layers", 32}, {"hidden", 4096}}, "model");
  EXPECT_EQ(r.heads, 32);
  EXPECT_THROW(
      parse_model({{"params", 7e9}, {"layers", 32}, {"hidden", 4096}, {"heads", 3}}, "model"),
      SpecError);
}

TEST(Presets, UnknownPresetListsValid) {
  try {
    preset(PresetKind::gpu, "a100", "cluster.gpu");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "cluster.gpu");
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown GPU preset 'a100'"), std::string::npos) << what;
    EXPECT_NE(what.find("a100-40gb, a100-80gb, a100-80gb-pcie, a10g, a6000, b200, cpu"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace stratagem::scenario
