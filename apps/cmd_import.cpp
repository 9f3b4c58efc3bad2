// `stratagem import --accelerate config.yaml | --deepspeed ds_config.json --model NAME [...]`:
// turns an existing accelerate or DeepSpeed config into a scenario (engine/scenario/import.hpp).
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "apps/command.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string accelerate;
  std::string deepspeed;
  std::string output;
  scenario::ImportOptions import;
};

int run(const Options& o) {
  if (o.accelerate.empty() == o.deepspeed.empty()) {
    throw SpecError("import", "give exactly one of --accelerate FILE and --deepspeed FILE");
  }
  std::string warning;
  const nlohmann::json scenario =
      o.accelerate.empty() ? scenario::import_deepspeed(o.deepspeed, o.import, &warning)
                           : scenario::import_accelerate(o.accelerate, o.import, &warning);
  if (!warning.empty()) std::cerr << "warning: " << warning << "\n";
  // The scenario format's own order, which reads top-down (nlohmann::json sorts keys).
  nlohmann::ordered_json ordered;
  for (const char* key : {"name", "description", "model", "cluster", "strategy", "training"}) {
    if (scenario.contains(key)) ordered[key] = scenario.at(key);
  }
  const std::string text = ordered.dump(2) + "\n";
  if (o.output.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(o.output, std::ios::binary);
  if (!out || !(out << text) || !out.flush()) {
    throw RuntimeError("cannot write " + o.output);
  }
  std::cout << "wrote " << o.output << " (" << scenario.at("name").get<std::string>() << ")\n";
  return 0;
}

Registration reg{
    {"import", "Make a scenario from an accelerate config (YAML) or a DeepSpeed config (JSON)", 40,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       auto* source = sub.add_option_group("source", "the config to import (one of)");
       source->add_option("--accelerate", o->accelerate,
                          "accelerate config.yaml (as `accelerate config` writes it)");
       source->add_option("--deepspeed", o->deepspeed, "DeepSpeed ds_config.json");
       source->require_option(1);
       sub.add_option("--model", o->import.model, "Model preset (`stratagem presets models`)")
           ->capture_default_str();
       sub.add_option("--cluster", o->import.cluster,
                      "Cluster preset; default: picked by the process count (laptop-cpu for "
                      "CPU runs, else dgx-a100-80gb with num_machines x GPUs per machine)");
       sub.add_option("--gpu", o->import.gpu, "GPU preset replacing the cluster's");
       sub.add_option("--seq_len", o->import.seq_len,
                      "Sequence length (default: 2048, or the model's learned positions if "
                      "fewer)")
           ->check(at_least_one());
       sub.add_option("--micro_batch_size", o->import.micro_batch_size,
                      "Micro-batch size per GPU (default: the file's, else 1)")
           ->check(at_least_one());
       sub.add_option("--gradient_accumulation_steps", o->import.grad_accum,
                      "Micro-batches per optimizer step (default: the file's)")
           ->check(at_least_one());
       sub.add_option("--num_processes", o->import.num_processes,
                      "Total processes (GPUs) (default: the file's; DeepSpeed: derived from "
                      "train_batch_size, else the cluster's GPUs)")
           ->check(at_least_one());
       sub.add_option("--num_machines", o->import.num_machines, "Machines (nodes)")
           ->check(at_least_one());
       sub.add_option("--mixed_precision", o->import.mixed_precision,
                      "no, fp16 or bf16 (default: the file's; decides \"auto\")");
       sub.add_option("-o,--output", o->output, "Write the scenario here instead of stdout");
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace stratagem::cli
