#include "engine/scenario/strategy.hpp"

#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::gpipe:
      return "gpipe";
    case Schedule::one_f_one_b:
      return "1f1b";
    case Schedule::interleaved:
      return "interleaved";
    case Schedule::zb_h1:
      return "zb-h1";
    case Schedule::interleaved_zb:
      return "interleaved-zb";
    case Schedule::zbv:
      return "zbv";
    case Schedule::dualpipev:
      return "dualpipev";
  }
  return "?";
}

const char* to_string(Sharding s) {
  switch (s) {
    case Sharding::none:
      return "none";
    case Sharding::zero1:
      return "zero1";
    case Sharding::zero2:
      return "zero2";
    case Sharding::zero3:
      return "zero3";
    case Sharding::fsdp_full_shard:
      return "FULL_SHARD";
    case Sharding::fsdp_shard_grad_op:
      return "SHARD_GRAD_OP";
    case Sharding::fsdp_hybrid_shard:
      return "HYBRID_SHARD";
  }
  return "?";
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::no:
      return "no";
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
    case Precision::fp8:
      return "fp8";
  }
  return "?";
}

const char* to_string(Attention a) {
  return a == Attention::flash ? "flash" : "eager";
}

const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::fa2:
      return "fa2";
    case AttentionKernel::fa1:
      return "fa1";
    case AttentionKernel::triton:
      return "triton";
    case AttentionKernel::cudnn:
      return "cudnn";
  }
  return "?";
}

const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::adam:
      return "adam";
    case Optimizer::adamw:
      return "adamw";
    case Optimizer::sgd:
      return "sgd";
  }
  return "?";
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::selective_op:
      return "selective-op";
    case Recompute::full:
      return "full";
  }
  return "?";
}

Sharding parse_sharding(const std::string& name, const std::string& path) {
  static const std::vector<std::pair<std::string, Sharding>> names = {
      {"none", Sharding::none},
      {"ddp", Sharding::none},
      {"NO_SHARD", Sharding::none},
      {"zero0", Sharding::none},
      {"zero1", Sharding::zero1},
      {"zero2", Sharding::zero2},
      {"zero3", Sharding::zero3},
      {"FULL_SHARD", Sharding::fsdp_full_shard},
      {"SHARD_GRAD_OP", Sharding::fsdp_shard_grad_op},
      {"HYBRID_SHARD", Sharding::fsdp_hybrid_shard},
      {"fsdp", Sharding::fsdp_full_shard},
  };
  std::vector<std::string> valid;
  for (const auto& [n, s] : names) {
    if (n == name) return s;
    valid.push_back(n);
  }
  std::string msg = "unknown sharding '" + name + "'";
  const std::string hint = closest(name, valid);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  std::string list;
  for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
  throw SpecError(path, msg + "; valid: " + list);
}

StackRefusal stack_refusal(const StrategySpec& s) {
  if (s.compile && !eager_modules(s.stack)) {
    return {"compile",
            std::string("torch.compile applies to the eager stacks (pytorch, deepspeed); stack '") +
                to_string(s.stack) + "' launches its own fused kernels"};
  }
  if (s.stack == Stack::megatron_legacy && s.precision == Precision::fp8) {
    return {"stack",
            "megatron-legacy (apex kernels) has no fp8 GEMMs: fp8 training came with Transformer "
            "Engine; use stack 'megatron'"};
  }
  if (s.fp8_recipe != Fp8Recipe::tensorwise && s.precision != Precision::fp8) {
    return {"fp8_recipe", std::string("fp8_recipe '") + to_string(s.fp8_recipe) +
                              "' applies to fp8 training (mixed_precision 'fp8')"};
  }
  if (s.precision == Precision::fp8 && !stack_runs(s.stack, s.fp8_recipe)) {
    const bool te = s.stack == Stack::megatron;
    return {"fp8_recipe",
            std::string("stack '") + to_string(s.stack) + "' has no " + to_string(s.fp8_recipe) +
                " recipe: " +
                (te ? "Transformer Engine scales per tensor (tensorwise), per 1x128/128x128 "
                      "block (blockwise) or per MX block (mxfp8)"
                    : "torchao scales per tensor (tensorwise), per row (rowwise) or per MX block "
                      "(mxfp8); blockwise is Transformer Engine's (stack 'megatron')")};
  }
  if (s.recompute == Recompute::selective_op && s.stack != Stack::pytorch) {
    return {"recompute",
            std::string("selective-op is torchtitan's per-op checkpointing policy (stack "
                        "'pytorch'); stack '") +
                to_string(s.stack) + "' recomputes by module: use 'selective' or 'full'"};
  }
  if (s.async_tp) {
    if (s.tp <= 1 || !s.sequence_parallel) {
      return {"async_tp",
              "async TP decomposes sequence parallelism's all-gathers and reduce-scatters: it "
              "needs tp > 1 with sequence_parallel"};
    }
    if (s.stack == Stack::pytorch && !s.compile) {
      return {"async_tp",
              "PyTorch's async TP is an Inductor pass (torchtitan refuses it without "
              "torch.compile): set strategy.compile"};
    }
    if (s.stack != Stack::pytorch && s.stack != Stack::megatron) {
      return {"async_tp", std::string("stack '") + to_string(s.stack) +
                              "' has no async TP: PyTorch's (stack pytorch with compile) or "
                              "Megatron-Core's tp_comm_overlap (stack megatron)"};
    }
  }
  return {};
}

StackRefusal stack_refusal(const StrategySpec& s, const GpuSpec& gpu) {
  if (StackRefusal why = stack_refusal(s)) return why;
  if (s.precision == Precision::fp8 && s.fp8_recipe == Fp8Recipe::mxfp8 && !gpu.mx_formats) {
    return {"fp8_recipe",
            "mxfp8 needs tensor cores that apply MX block scales (Blackwell: b200, gb200); the "
            "cluster's GPU '" +
                gpu.name + "' has none (cluster.gpu.mx_formats)"};
  }
  return {};
}

void apply_stack_flags(StrategySpec& s, const StackFlags& flags, const GpuSpec& gpu) {
  if (!flags.stack.empty()) s.stack = parse_stack(flags.stack, "--stack");
  if (flags.compile) s.compile = true;
  if (!flags.fp8_recipe.empty()) s.fp8_recipe = parse_fp8_recipe(flags.fp8_recipe, "--fp8_recipe");
  if (const StackRefusal why = stack_refusal(s, gpu)) {
    std::string path = "strategy." + why.key;
    if (why.key == "compile" && flags.compile) {
      path = "--compile";
    } else if (why.key == "fp8_recipe" && !flags.fp8_recipe.empty()) {
      path = "--fp8_recipe";
    } else if (!flags.stack.empty()) {
      path = "--stack";
    }
    throw SpecError(path, why.reason);
  }
}

std::string stack_text(const StrategySpec& s) {
  std::string out = to_string(s.stack);
  if (s.compile) out += " + torch.compile";
  if (s.precision == Precision::fp8 && s.fp8_recipe != Fp8Recipe::tensorwise) {
    out += std::string(", fp8 ") + to_string(s.fp8_recipe);
  }
  if (s.async_tp) out += ", async TP";
  return out;
}

bool shards_optimizer(Sharding s) {
  return s != Sharding::none;
}
bool shards_gradients(Sharding s) {
  return s != Sharding::none && s != Sharding::zero1;
}
bool shards_parameters(Sharding s) {
  return s == Sharding::zero3 || s == Sharding::fsdp_full_shard ||
         s == Sharding::fsdp_shard_grad_op || s == Sharding::fsdp_hybrid_shard;
}
bool reshards_after_forward(Sharding s) {
  return s == Sharding::zero3 || s == Sharding::fsdp_full_shard || s == Sharding::fsdp_hybrid_shard;
}

const char* to_string(MoeDispatcher d) {
  return d == MoeDispatcher::allgather ? "allgather" : "alltoall";
}

StrategySpec parse_strategy(const nlohmann::json& object, const std::string& path) {
  ObjectReader r(object, path);
  StrategySpec s;
  s.dp = static_cast<int>(r.integer_or("dp", 1, 1, 1 << 24));
  s.pp = static_cast<int>(r.integer_or("pp", 1, 1, 1 << 16));
  s.tp = static_cast<int>(r.integer_or("tp", 1, 1, 1 << 10));
  s.sequence_parallel = r.boolean_or("sequence_parallel", false);
  s.cp = static_cast<int>(r.integer_or("cp", 1, 1, 1 << 10));
  s.ep = static_cast<int>(r.integer_or("ep", 1, 1, 1 << 20));
  s.etp = static_cast<int>(r.integer_or("etp", 1, 1, 1 << 10));
  s.moe_dispatcher =
      r.choice_or("moe_dispatcher", "alltoall", {"alltoall", "allgather"}) == "allgather"
          ? MoeDispatcher::allgather
          : MoeDispatcher::alltoall;
  s.moe_load_imbalance = r.number_or("moe_load_imbalance", 1.0, 1.0, 1 << 20);
  s.attention = r.choice_or("attention", "flash", {"flash", "eager"}) == "eager" ? Attention::eager
                                                                                 : Attention::flash;
  if (r.has("attention_kernel")) {
    const std::string k = r.choice("attention_kernel", {"fa2", "fa1", "triton", "cudnn"});
    s.attention_kernel = k == "fa1"      ? AttentionKernel::fa1
                         : k == "triton" ? AttentionKernel::triton
                         : k == "cudnn"  ? AttentionKernel::cudnn
                                         : AttentionKernel::fa2;
    if (s.attention == Attention::eager) {
      throw SpecError(r.child_path("attention_kernel"),
                      "names a fused attention kernel; attention is 'eager' (set it to 'flash')");
    }
  }
  if (s.cp > 1 && s.attention == Attention::eager) {
    throw SpecError(r.child_path("attention"),
                    "context parallelism runs ring attention in the fused kernel (Megatron-LM's "
                    "CP needs Transformer Engine's flash/fused attention); use attention 'flash'");
  }
  const std::string schedule =
      r.choice_or("schedule", "1f1b",
                  {"gpipe", "1f1b", "interleaved", "zb-h1", "interleaved-zb", "zbv", "dualpipev"});
  s.schedule = schedule == "gpipe"            ? Schedule::gpipe
               : schedule == "interleaved"    ? Schedule::interleaved
               : schedule == "zb-h1"          ? Schedule::zb_h1
               : schedule == "interleaved-zb" ? Schedule::interleaved_zb
               : schedule == "zbv"            ? Schedule::zbv
               : schedule == "dualpipev"      ? Schedule::dualpipev
                                              : Schedule::one_f_one_b;
  s.chunks = static_cast<int>(r.integer_or("chunks", multi_chunk(s.schedule) ? 2 : 1, 1, 1024));
  if (!multi_chunk(s.schedule) && s.chunks != 1) {
    throw SpecError(r.child_path("chunks"),
                    "chunks > 1 needs schedule 'interleaved' or 'interleaved-zb'");
  }
  if (v_shape(s.schedule) && s.chunks != 2) {
    throw SpecError(r.child_path("chunks"), "the " + schedule +
                                                " schedule runs exactly 2 chunks per rank (a V: "
                                                "stages r and 2·pp−1−r)");
  }
  if (multi_chunk(s.schedule) && s.chunks < 2) {
    throw SpecError(r.child_path("chunks"), "the " + schedule + " schedule needs chunks >= 2");
  }
  s.embedding_as_layer = r.boolean_or("account_for_embedding_in_pipeline_split", false);
  s.loss_as_layer = r.boolean_or("account_for_loss_in_pipeline_split", false);
  s.micro_batch_size = static_cast<int>(r.integer_or("micro_batch_size", 1, 1, 1 << 24));
  s.grad_accum = static_cast<int>(r.integer_or("grad_accum", 0, 1, kMaxMicroBatches));  // 0: derive
  s.sharding = r.has("sharding") ? parse_sharding(r.string("sharding"), r.child_path("sharding"))
                                 : Sharding::none;
  const std::string mp = r.choice_or("mixed_precision", "no", {"no", "fp16", "bf16", "fp8"});
  s.precision = mp == "fp16"   ? Precision::fp16
                : mp == "bf16" ? Precision::bf16
                : mp == "fp8"  ? Precision::fp8
                               : Precision::no;
  s.tf32 = r.boolean_or("tf32", false);
  if (s.tf32 && s.precision != Precision::no) {
    throw SpecError(r.child_path("tf32"),
                    "tf32 applies to fp32 training (mixed_precision 'no'), "
                    "but mixed_precision is '" +
                        mp + "'");
  }
  if (r.has("stack")) s.stack = parse_stack(r.string("stack"), r.child_path("stack"));
  s.compile = r.boolean_or("compile", false);
  if (r.has("fp8_recipe")) {
    s.fp8_recipe = parse_fp8_recipe(r.string("fp8_recipe"), r.child_path("fp8_recipe"));
  }
  s.async_tp = r.boolean_or("async_tp", false);
  if (const StackRefusal why = stack_refusal(s)) throw SpecError(r.child_path(why.key), why.reason);
  s.fp8_all_gather = r.boolean_or("fp8_all_gather", false);
  if (s.fp8_all_gather && s.precision != Precision::fp8) {
    throw SpecError(r.child_path("fp8_all_gather"),
                    "fp8_all_gather needs mixed_precision 'fp8', not '" + mp + "'");
  }
  const char* loss_keys[] = {"initial_scale_power", "loss_scale_window", "hysteresis",
                             "min_loss_scale"};
  for (const char* key : loss_keys) {
    if (r.has(key) && s.precision != Precision::fp16) {
      throw SpecError(r.child_path(key), std::string("loss scaling applies to fp16 only, but "
                                                     "mixed_precision is '") +
                                             mp + "'");
    }
  }
  s.loss_scale.initial_scale_power =
      static_cast<int>(r.integer_or("initial_scale_power", 16, 0, 64));
  s.loss_scale.loss_scale_window =
      static_cast<int>(r.integer_or("loss_scale_window", 1000, 1, 1 << 30));
  s.loss_scale.hysteresis = static_cast<int>(r.integer_or("hysteresis", 2, 1, 1 << 20));
  s.loss_scale.min_loss_scale = r.number_or("min_loss_scale", 1.0, 1e-30, 1e30);
  const std::string rc =
      r.choice_or("recompute", "none", {"none", "selective", "selective-op", "full"});
  s.recompute = rc == "full"           ? Recompute::full
                : rc == "selective"    ? Recompute::selective
                : rc == "selective-op" ? Recompute::selective_op
                                       : Recompute::none;
  s.bucket_mb = r.number_or("bucket_mb", 25.0, 1e-6, 1e9);
  const std::string opt = r.choice_or("optimizer", "adamw", {"adam", "adamw", "sgd"});
  s.optimizer = opt == "adam" ? Optimizer::adam : opt == "sgd" ? Optimizer::sgd : Optimizer::adamw;
  s.offload_optimizer = r.choice_or("offload_optimizer", "none", {"none", "cpu"}) == "cpu"
                            ? Offload::cpu
                            : Offload::none;
  s.prefetch = static_cast<int>(r.integer_or("prefetch", 1, 0, 64));
  s.master_weights = r.boolean_or("master_weights", true);
  if (!s.master_weights && s.precision != Precision::bf16 && s.precision != Precision::fp8) {
    throw SpecError(r.child_path("master_weights"),
                    "only bf16 (or fp8) training may drop the fp32 master weights (fp16 needs "
                    "them; fp32 has none)");
  }
  r.finish();
  return s;
}

double compute_param_bytes(Precision p) {
  return p == Precision::no ? 4.0 : 2.0;
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::no:
      return DType::fp32;
    case Precision::fp16:
      return DType::fp16;
    case Precision::bf16:
    case Precision::fp8:
      return DType::bf16;
  }
  return DType::fp32;
}

DType gemm_dtype(const StrategySpec& s) {
  if (s.precision == Precision::fp8) return DType::fp8;
  if (s.precision == Precision::no && s.tf32) return DType::tf32;
  return compute_dtype(s.precision);
}

Recompute effective_recompute(const StrategySpec& s) {
  if (s.recompute == Recompute::selective && s.attention == Attention::flash) {
    return Recompute::none;
  }
  return s.recompute;
}

double optimizer_state_bytes_per_param(Optimizer o) {
  return o == Optimizer::sgd ? 4.0 : 8.0;
}

bool has_master_weights(const StrategySpec& s) {
  return s.precision != Precision::no && s.master_weights;
}

double zero_k(const StrategySpec& s) {
  return optimizer_state_bytes_per_param(s.optimizer) + (has_master_weights(s) ? 4.0 : 0.0);
}

nlohmann::json to_json(const StrategySpec& s) {
  nlohmann::json j = {{"dp", s.dp},
                      {"pp", s.pp},
                      {"schedule", to_string(s.schedule)},
                      {"micro_batch_size", s.micro_batch_size},
                      {"grad_accum", s.grad_accum},
                      {"sharding", to_string(s.sharding)},
                      {"mixed_precision", to_string(s.precision)},
                      {"recompute", to_string(s.recompute)},
                      {"bucket_mb", s.bucket_mb},
                      {"optimizer", to_string(s.optimizer)},
                      {"offload_optimizer", s.offload_optimizer == Offload::cpu ? "cpu" : "none"},
                      {"prefetch", s.prefetch},
                      {"master_weights", s.master_weights}};
  if (multi_chunk(s.schedule)) j["chunks"] = s.chunks;
  if (s.embedding_as_layer) j["account_for_embedding_in_pipeline_split"] = true;
  if (s.loss_as_layer) j["account_for_loss_in_pipeline_split"] = true;
  if (s.tp > 1) j["tp"] = s.tp;
  if (s.sequence_parallel) j["sequence_parallel"] = true;
  if (s.cp > 1) j["cp"] = s.cp;
  if (s.ep > 1) j["ep"] = s.ep;
  if (s.etp > 1) j["etp"] = s.etp;
  if (s.moe_dispatcher != MoeDispatcher::alltoall)
    j["moe_dispatcher"] = to_string(s.moe_dispatcher);
  if (s.moe_load_imbalance != 1.0) j["moe_load_imbalance"] = s.moe_load_imbalance;
  j["attention"] = to_string(s.attention);
  if (s.attention_kernel != AttentionKernel::fa2)
    j["attention_kernel"] = to_string(s.attention_kernel);
  if (s.tf32) j["tf32"] = true;
  if (s.fp8_all_gather) j["fp8_all_gather"] = true;
  if (s.stack != Stack::pytorch) j["stack"] = to_string(s.stack);
  if (s.compile) j["compile"] = true;
  if (s.fp8_recipe != Fp8Recipe::tensorwise) j["fp8_recipe"] = to_string(s.fp8_recipe);
  if (s.async_tp) j["async_tp"] = true;
  if (s.precision == Precision::fp16) {
    j["initial_scale_power"] = s.loss_scale.initial_scale_power;
    j["loss_scale_window"] = s.loss_scale.loss_scale_window;
    j["hysteresis"] = s.loss_scale.hysteresis;
    j["min_loss_scale"] = s.loss_scale.min_loss_scale;
  }
  return j;
}

}  // namespace stratagem::scenario
