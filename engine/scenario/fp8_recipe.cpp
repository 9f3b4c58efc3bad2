#include "engine/scenario/fp8_recipe.hpp"

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::rowwise:
      return "rowwise";
    case Fp8Recipe::blockwise:
      return "blockwise";
    case Fp8Recipe::mxfp8:
      return "mxfp8";
    case Fp8Recipe::tensorwise:
      break;
  }
  return "tensorwise";
}

Fp8Recipe parse_fp8_recipe(const std::string& name, const std::string& path) {
  for (Fp8Recipe r :
       {Fp8Recipe::tensorwise, Fp8Recipe::rowwise, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    if (name == to_string(r)) return r;
  }
  throw SpecError(
      path, "unknown fp8 recipe '" + name + "'; valid: tensorwise, rowwise, blockwise, mxfp8");
}

bool stack_runs(Stack s, Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::tensorwise:
    case Fp8Recipe::mxfp8:
      return s != Stack::megatron_legacy;
    case Fp8Recipe::rowwise:
      return eager_modules(s);
    case Fp8Recipe::blockwise:
      return s == Stack::megatron;
  }
  return false;
}

double fp8_gemm_rate(Fp8Recipe r, bool mx_formats) {
  constexpr double kBlockwise = 0.82;  // TE gemm_profiling.rst, H200 NVL (see the header)
  constexpr double kMxfp8 = 0.95;      // TE gemm_profiling.rst, B300: 6.812 / 7.161 ms
  switch (r) {
    case Fp8Recipe::blockwise:
      return mx_formats ? kMxfp8 : kBlockwise;
    case Fp8Recipe::mxfp8:
      return kMxfp8;
    case Fp8Recipe::tensorwise:
    case Fp8Recipe::rowwise:
      break;
  }
  return 1.0;
}

}  // namespace stratagem::scenario
