// `stratagem worker <scenario> [training flags]`: one rank of a real run, joining a job that
// torchrun, Slurm, mpirun or `stratagem run` started (see engine/launch/dist_env.hpp).
#include "apps/command.hpp"
#include "apps/torch/worker_flags.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {
namespace {

Registration reg{{"worker",
                  "Run one rank of a real training job (started by torchrun, Slurm, mpirun or "
                  "`stratagem run`)",
                  61, [](CLI::App& sub) {
                    auto f = std::make_shared<WorkerFlags>();
                    add_worker_flags(sub, *f);
                    return std::function<int()>([f] {
                      finish_worker_flags(*f);
                      return runtime::run_worker(f->args);
                    });
                  }}};

}  // namespace
}  // namespace stratagem::cli
