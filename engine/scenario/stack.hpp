#pragma once
// The training stack: which framework's code launches the model's kernels. The same model and
// strategy run different kernels under Megatron-Core with Transformer Engine (fused norm +
// GEMM, fused RoPE, fused activations) than under eager PyTorch (each elementwise op its own
// kernel), and torch.compile fuses eager's elementwise chains again; the kernel lists
// (engine/workload/kernels.hpp) follow each stack's public code.
#include <string>

namespace stratagem::scenario {

/// `megatron`: Megatron-Core with Transformer Engine (NeMo, Megatron-Bridge, Megatron-LM
///   today): megatron/core/models/gpt/gpt_layer_specs.py
///   get_gpt_layer_with_transformer_engine_spec.
/// `megatron_legacy`: Megatron-LM / Megatron-DeepSpeed before Transformer Engine, with apex's
///   fused norms and jit-fused bias-activation and bias-dropout-add
///   (megatron/model/transformer.py).
/// `pytorch`: eager nn.Module code — torchtitan (torchtitan/models/llama3/model/model.py),
///   HuggingFace Transformers under Accelerate or FSDP, Composer. The default: what
///   Accelerate users run.
/// `deepspeed`: the DeepSpeed engine on PyTorch modules (HuggingFace's, as eager `pytorch`
///   runs them).
enum class Stack { pytorch, megatron, megatron_legacy, deepspeed };

const char* to_string(Stack s);
/// Parses "megatron", "megatron-legacy", "pytorch", "deepspeed"; SpecError at `path` otherwise.
Stack parse_stack(const std::string& name, const std::string& path);
/// Eager stacks run PyTorch modules op by op (pytorch, deepspeed): torch.compile applies.
bool eager_modules(Stack s);

}  // namespace stratagem::scenario
