#include "engine/scenario/stack.hpp"

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

const char* to_string(Stack s) {
  switch (s) {
    case Stack::megatron:
      return "megatron";
    case Stack::megatron_legacy:
      return "megatron-legacy";
    case Stack::deepspeed:
      return "deepspeed";
    case Stack::pytorch:
      break;
  }
  return "pytorch";
}

Stack parse_stack(const std::string& name, const std::string& path) {
  for (Stack s : {Stack::pytorch, Stack::megatron, Stack::megatron_legacy, Stack::deepspeed}) {
    if (name == to_string(s)) return s;
  }
  throw SpecError(
      path, "unknown stack '" + name + "'; valid: pytorch, megatron, megatron-legacy, deepspeed");
}

bool eager_modules(Stack s) {
  return s == Stack::pytorch || s == Stack::deepspeed;
}

}  // namespace stratagem::scenario
