// `stratagem info <scenario> [--json]`: the model's derived sizes.
#include <cstdio>
#include <iostream>

#include "apps/command.hpp"
#include "engine/spec/scenario.hpp"

namespace stratagem::cli {
namespace {

Registration reg{{"info", "Show a scenario's model: parameters, FLOPs per token, activations", 20,
                  [](CLI::App& sub) {
                    auto file = std::make_shared<std::string>();
                    auto json = std::make_shared<bool>(false);
                    sub.add_option("scenario", *file, "Scenario file or shipped name")->required();
                    sub.add_flag("--json", *json, "Print JSON");
                    return std::function<int()>([file, json] {
                      const auto s = spec::load_scenario(*file);
                      const auto& m = s.model;
                      const double params = spec::total_params(m);
                      const double flops = spec::training_flops_per_token(m, s.training.seq_len);
                      const double elem = s.strategy.precision == spec::Precision::no ? 4 : 2;
                      const double act = spec::activation_bytes_per_layer(
                          m, s.training.seq_len, s.strategy.micro_batch_size,
                          s.strategy.recompute, elem);
                      if (*json) {
                        nlohmann::json j = {{"name", s.name},
                                            {"model", spec::to_json(m)},
                                            {"params", params},
                                            {"flops_per_token", flops},
                                            {"activation_bytes_per_layer", act}};
                        std::cout << j.dump(2) << "\n";
                      } else {
                        std::printf("%s\nparams: %.4g\nflops/token: %.4g\nact/layer: %.4g\n",
                                    s.name.c_str(), params, flops, act);
                      }
                      return 0;
                    });
                  }}};

}  // namespace
}  // namespace stratagem::cli
