#pragma once
// Shared by the import tests: the preamble `accelerate config` writes, the default import
// options and an error catcher.
#include <gtest/gtest.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"

namespace stratagem::scenario {

// What `accelerate config` writes for one machine, before the distributed part.
inline const char* kCommon = R"(compute_environment: LOCAL_MACHINE
debug: false
downcast_bf16: 'no'
enable_cpu_affinity: false
machine_rank: 0
main_training_function: main
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
)";

inline std::string yaml(const std::string& body) {
  return kCommon + body;
}

inline ImportOptions llama(int seq_len = 2048) {
  ImportOptions o;
  o.model = "llama2-7b";
  o.seq_len = seq_len;
  return o;
}

struct Caught {
  std::string path, what;
};

template <typename F>
Caught error_of(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return {e.path(), e.what()};
  }
  ADD_FAILURE() << "no SpecError";
  return {};
}

inline void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

}  // namespace stratagem::scenario
