// The hardware presets' figures held to the numbers their sources give (each preset's
// "source" string says where a figure comes from and how it was derived), read as raw JSON
// so that a typo in scenarios/presets/*.json fails here even before the parser sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/presets.hpp"

namespace stratagem::scenario {
namespace {

const nlohmann::json& gpu(const std::string& name) {
  return preset(PresetKind::gpu, name, "test");
}

const nlohmann::json& cluster(const std::string& name) {
  return preset(PresetKind::cluster, name, "test");
}

double peak(const std::string& name, const char* dtype) {
  return gpu(name).at("peak_tflops").at(dtype).get<double>();
}

double field(const nlohmann::json& j, const char* key, const char* sub) {
  return j.at(key).at(sub).get<double>();
}

// Dense peaks (TFLOP/s), memory (GB as the vendor labels it) and bandwidth (GB/s).
struct Peaks {
  const char* name;
  double fp32, tf32, bf16, fp8;  // fp8 0: the part has no FP8 tensor cores
  double memory, hbm;
  /// The bf16 GEMM maximum: the shared uncalibrated default unless a MAMF figure exists.
  double matmul_max = 0.8;
};

void expect_peaks(const Peaks& p) {
  SCOPED_TRACE(p.name);
  const nlohmann::json& g = gpu(p.name);
  EXPECT_EQ(peak(p.name, "fp32"), p.fp32);
  EXPECT_EQ(peak(p.name, "tf32"), p.tf32);
  EXPECT_EQ(peak(p.name, "fp16"), p.bf16);
  EXPECT_EQ(peak(p.name, "bf16"), p.bf16);
  if (p.fp8 > 0) {
    EXPECT_EQ(peak(p.name, "fp8"), p.fp8);
  } else {
    EXPECT_FALSE(g.at("peak_tflops").contains("fp8"));
  }
  EXPECT_EQ(g.at("memory_GiB").get<double>(), p.memory);
  EXPECT_EQ(g.at("hbm_GBps").get<double>(), p.hbm);
  // The shared uncalibrated GEMM default for every new GPU without a measured maximum.
  EXPECT_EQ(field(g, "matmul_efficiency", "max"), p.matmul_max);
  EXPECT_EQ(field(g, "matmul_efficiency", "half_dim"), 128.0);
  EXPECT_EQ(g.at("kernel_launch_us").get<double>(), 5.0);
}

TEST(PresetSources, HopperDatasheets) {
  // H100 SXM5 whitepaper: FP8 1,978.9 dense (datasheet 3,958 with sparsity, halved).
  EXPECT_EQ(peak("h100-80gb", "fp8"), 1979.0);
  // H100 datasheet, PCIe column: FP32 51; TF32 756, BF16 1,513, FP8 3,026 sparse, halved;
  // 80 GB, 2 TB/s.
  expect_peaks({"h100-pcie", 51, 378, 756.5, 1513, 80, 2000});
  // H100 datasheet, NVL column: FP32 60; TF32 835, BF16 1,671, FP8 3,341 sparse, halved;
  // 94 GB, 3.9 TB/s.
  expect_peaks({"h100-nvl", 60, 417.5, 835.5, 1670.5, 94, 3900});
  // H200 datasheet: 141 GB HBM3e, 4.8 TB/s; compute as the H100 SXM5 whitepaper (same GH100).
  expect_peaks({"h200", 66.9, 494.7, 989.4, 1979, 141, 4800});
}

TEST(PresetSources, BlackwellDatasheets) {
  // NVIDIA "Individual Blackwell GPU Specifications", HGX B200: FP32 75; TF32 2.2, BF16 4.5,
  // FP8 9 PFLOP/s sparse, halved; 180 GB at 7.7 TB/s.
  // bf16 GEMM maximum: ml-engineering's MAMF table, 1,745.0 of 2,250 TFLOP/s.
  expect_peaks({"b200", 75, 1100, 2250, 4500, 180, 7700, 0.776});
  // Same table, GB200 NVL72 (per GPU): FP32 80; TF32 2.5, BF16 5, FP8 10 PFLOP/s sparse,
  // halved; 186 GB at 8 TB/s.
  // bf16 GEMM maximum: the MAMF table, 1,822.0 of 2,500 TFLOP/s.
  expect_peaks({"gb200", 80, 1250, 2500, 5000, 186, 8000, 0.729});
  // Memory-bound kernels at torchao's measured 84 % of the bandwidth (B300, roofline_utils.py).
  for (const char* name : {"b200", "gb200"}) {
    EXPECT_EQ(field(gpu(name), "hbm_efficiency", "value"), 0.84) << name;
  }
}

TEST(PresetSources, AmdDatasheet) {
  // AMD Instinct MI300X specifications (dense): FP32 163.4, TF32 653.7, BF16 1,307.4,
  // FP8 2,614.9; 192 GB HBM3 at 5.3 TB/s.
  expect_peaks({"mi300x", 163.4, 653.7, 1307.4, 2614.9, 192, 5300});
}

TEST(PresetSources, AdaDatasheets) {
  // Ada whitepaper, RTX 4090: FP8 tensor with FP32 accumulate 330.3 dense (660.6 with FP16
  // accumulate).
  EXPECT_EQ(peak("rtx4090", "fp8"), 330.3);
  // L4 datasheet: FP8 485 with sparsity, halved.
  EXPECT_EQ(peak("l4", "fp8"), 242.5);
  // L40S datasheet (dense | sparse): FP32 91.6, TF32 183 | 366, BF16 362.05 | 733,
  // FP8 733 | 1,466; 48 GB GDDR6 at 864 GB/s.
  expect_peaks({"l40s", 91.6, 183, 362.05, 733, 48, 864});
}

TEST(PresetSources, AmpereDatasheets) {
  // A100 datasheet, 80GB PCIe column: the SXM peaks, HBM2e 1,935 GB/s, 300 W.
  expect_peaks({"a100-80gb-pcie", 19.5, 156, 312, 0, 80, 1935});
  // Baseten "NVIDIA A10 vs A10G" spec table (no NVIDIA datasheet): FP32 35, TF32 35,
  // BF16 70 dense; 24 GB at 600 GB/s.
  expect_peaks({"a10g", 35, 35, 70, 0, 24, 600});
  // RTX A6000 datasheet: FP32 38.7, tensor 309.7 sparse -> 154.8; TF32 at half that, 77.4;
  // 48 GB GDDR6 at 768 GB/s.
  expect_peaks({"a6000", 38.7, 77.4, 154.8, 0, 48, 768});
}

// Fraction of the dense FP8 peak large cuBLASLt FP8 GEMMs reach.
TEST(PresetSources, Fp8MatmulEfficiency) {
  const std::pair<const char*, double> expected[] = {
      {"h100-80gb", 0.709},  // ml-engineering MAMF table: 1,402.6 of 1,979
      {"h100-pcie", 0.709},  // same SM architecture as H100 SXM5
      {"h100-nvl", 0.709},   // same SM architecture as H100 SXM5
      {"h200", 0.734},       // MAMF table: 1,453.4 of 1,979
      {"b200", 0.763},       // MAMF table: 3,432.5 of 4,500
      {"gb200", 0.723},      // MAMF table: 3,615.6 of 5,000
      {"mi300x", 0.51},      // no FP8 measurement: the part's bf16 MAMF, 668.4 of 1,307.4
      {"rtx4090", 0.8},      // no measurement: the shared uncalibrated default
      {"l4", 0.8},           // idem
      {"l40s", 0.8},         // idem
  };
  for (const auto& [name, max] : expected) {
    EXPECT_EQ(field(gpu(name), "fp8_matmul_efficiency", "max"), max) << name;
    EXPECT_EQ(field(gpu(name), "fp8_matmul_efficiency", "half_dim"), 128.0) << name;
  }
}

// FlashAttention forward/backward fraction of the dense 16-bit peak (causal, head dim 128,
// long sequences, FLOPs as the kernel executes them).
TEST(PresetSources, AttentionEfficiency) {
  struct Case {
    const char* name;
    double forward, backward;
  } cases[] = {
      // FlashAttention-2 paper Fig. 4d: 189 TFLOP/s fwd+bwd of 312, split 73:63.
      {"a100-80gb", 0.67, 0.58},
      {"a100-40gb", 0.67, 0.58},       // same SM architecture (GA100)
      {"a100-80gb-pcie", 0.67, 0.58},  // same SM architecture (GA100)
      {"rtx3090", 0.67, 0.58},         // Ampere (GA102), derived from A100
      {"a6000", 0.67, 0.58},           // Ampere (GA102), derived from A100
      {"a10g", 0.67, 0.58},            // Ampere (GA102), derived from A100
      {"rtx4090", 0.67, 0.58},         // Ada runs FA2's sm80 kernels, derived from A100
      {"l4", 0.67, 0.58},              // idem
      {"l40s", 0.67, 0.58},            // idem
      // FlashAttention-2 paper Fig. 8d: 328 of 989.4 fwd+bwd; fwd ~ bwd (flash-attention #1791).
      {"h100-80gb", 0.33, 0.33},
      {"h100-pcie", 0.33, 0.33},  // same SM architecture as H100 SXM5
      {"h100-nvl", 0.33, 0.33},   // idem
      {"h200", 0.33, 0.33},       // idem
      // FlashAttention-4, flash-attention PR #2280: 1,418.1 / 1,208.6 of 2,250.
      {"b200", 0.63, 0.54},
      {"gb200", 0.63, 0.54},  // same SM architecture (SM100) as B200
      // ROCm/flash-attention #142: 353.22 / 194.43 of 1,307.4 (non-causal).
      {"mi300x", 0.27, 0.15},
      // No FlashAttention on sm70: unfused PyTorch attention, FA2 paper Fig. 4d, 34 of 312.
      {"v100-32gb", 0.11, 0.11},
      // Convention: attention runs as LibTorch GEMMs, modelled by matmul_efficiency.
      {"cpu", 1.0, 1.0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(field(gpu(c.name), "attention_efficiency", "forward"), c.forward) << c.name;
    EXPECT_EQ(field(gpu(c.name), "attention_efficiency", "backward"), c.backward) << c.name;
  }
}

struct Links {
  const char* name;
  const char* gpu;
  int nodes, gpus_per_node;
  double intra_GBps, intra_us, inter_GBps, inter_us;
};

void expect_links(const Links& l) {
  SCOPED_TRACE(l.name);
  const nlohmann::json& c = cluster(l.name);
  EXPECT_EQ(c.at("gpu").get<std::string>(), l.gpu);
  EXPECT_EQ(c.at("nodes").get<int>(), l.nodes);
  EXPECT_EQ(c.at("gpus_per_node").get<int>(), l.gpus_per_node);
  EXPECT_EQ(field(c, "intra_node", "bandwidth_GBps"), l.intra_GBps);
  EXPECT_EQ(field(c, "intra_node", "latency_us"), l.intra_us);
  EXPECT_EQ(field(c, "inter_node", "bandwidth_GBps"), l.inter_GBps);
  EXPECT_EQ(field(c, "inter_node", "latency_us"), l.inter_us);
}

TEST(PresetSources, ClusterLinks) {
  // NVLink 4: 900 GB/s bidirectional = 450 per direction; 8 x ConnectX-7 400 Gb/s = 50 GB/s
  // per GPU (DGX BasePOD RA); NCCL hwLat ring/Simple: 3.4 us NVLink, 9.6 us network.
  expect_links({"dgx-h200", "h200", 1, 8, 450, 3.4, 50, 9.6});
  // NVLink 5: 1.8 TB/s bidirectional = 900 per direction; 8 x ConnectX-7 400 Gb/s.
  expect_links({"dgx-b200", "b200", 1, 8, 900, 3.4, 50, 9.6});
  // DGX GB200 user guide: 18 trays x 4 GPUs, 4 x ConnectX-7 400G per tray; NVLink 5.
  expect_links({"gb200-nvl72", "gb200", 18, 4, 900, 3.4, 50, 9.6});
  EXPECT_EQ(cluster("gb200-nvl72").at("nvlink_domain_gpus").get<int>(), 72);
  // HGX AI Factory RA, 2-8-9-400: 400 Gb/s per GPU; NVLink 4 as DGX H100.
  expect_links({"hgx-h100-400g", "h100-80gb", 1, 8, 450, 3.4, 50, 9.6});
  // PCIe Gen4 x16 ~25 GB/s effective, NCCL PCIe step 5.7 us; assumed one HDR 200 Gb/s NIC
  // (25 GB/s) per node shared by 8 GPUs.
  expect_links({"a100-pcie-8x", "a100-80gb-pcie", 1, 8, 25, 5.7, 3.125, 9.6});
}

// Invariants every GPU preset keeps: a source, an attention efficiency in (0, 1], and an
// fp8 GEMM curve exactly when the part has an fp8 peak.
TEST(PresetSources, EveryGpuHasSourcedAttentionAndConsistentFp8) {
  for (const auto& name : preset_names(PresetKind::gpu)) {
    SCOPED_TRACE(name);
    const nlohmann::json& g = gpu(name);
    ASSERT_TRUE(g.contains("source") && g.at("source").is_string());
    EXPECT_FALSE(g.at("source").get<std::string>().empty());
    ASSERT_TRUE(g.contains("attention_efficiency"));
    for (const char* pass : {"forward", "backward"}) {
      const double e = field(g, "attention_efficiency", pass);
      EXPECT_GT(e, 0.0) << pass;
      EXPECT_LE(e, 1.0) << pass;
    }
    const bool has_fp8 = g.at("peak_tflops").contains("fp8");
    EXPECT_EQ(g.contains("fp8_matmul_efficiency"), has_fp8);
    if (has_fp8) {
      const double max = field(g, "fp8_matmul_efficiency", "max");
      EXPECT_GT(max, 0.0);
      EXPECT_LE(max, 1.0);
      // Every fp8 tensor core runs at least at the 16-bit rate.
      EXPECT_GE(peak(name, "fp8"), peak(name, "bf16"));
    }
  }
}

TEST(PresetSources, EveryClusterNamesAGpuPreset) {
  const std::vector<std::string> gpus = preset_names(PresetKind::gpu);
  for (const auto& name : preset_names(PresetKind::cluster)) {
    SCOPED_TRACE(name);
    const nlohmann::json& c = cluster(name);
    ASSERT_TRUE(c.contains("gpu") && c.at("gpu").is_string());
    const std::string g = c.at("gpu").get<std::string>();
    EXPECT_NE(std::find(gpus.begin(), gpus.end(), g), gpus.end()) << g;
    ASSERT_TRUE(c.contains("source") && c.at("source").is_string());
    if (c.contains("nvlink_domain_gpus")) {
      const int domain = c.at("nvlink_domain_gpus").get<int>();
      const int per_node = c.at("gpus_per_node").get<int>();
      EXPECT_EQ(domain % per_node, 0);
      EXPECT_LE(domain, c.value("nodes", 1) * per_node);
    }
  }
}

TEST(PresetSources, NewPresetsExist) {
  for (const char* name : {"h100-pcie", "h100-nvl", "h200", "b200", "gb200", "mi300x", "l40s",
                           "a10g", "a6000", "a100-80gb-pcie"}) {
    EXPECT_NO_THROW(gpu(name)) << name;
  }
  for (const char* name :
       {"dgx-h200", "dgx-b200", "gb200-nvl72", "hgx-h100-400g", "a100-pcie-8x"}) {
    EXPECT_NO_THROW(cluster(name)) << name;
  }
}

}  // namespace
}  // namespace stratagem::scenario
