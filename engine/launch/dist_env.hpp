#pragma once
// Where a worker process sits in a job, read from the environment its launcher set:
// torchrun (and `stratagem run`), Slurm's srun, or Open MPI's mpirun. No LibTorch here.
#include <map>
#include <string>

namespace stratagem::launch {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// "torchrun" | "slurm" | "mpirun" | "stratagem", or "none" for a lone process
  std::string launcher = "none";
  /// torchrun 2.x hosts the store itself on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True):
  /// then every rank, rank 0 included, connects as a client.
  bool use_agent_store = false;
  /// torchrun's restart count (TORCHELASTIC_RESTART_COUNT), so a restarted job's keys do not
  /// meet the previous attempt's.
  int restart_count = 0;
};

/// The default rendezvous port when Slurm or mpirun start the workers and MASTER_PORT is unset
/// (torchrun's default).
inline constexpr int kDefaultMasterPort = 29500;

/// Reads the process environment; see parse_dist_env.
DistEnv read_dist_env();

/// Interprets launcher variables, first match wins:
///  - RANK set: torchrun / `stratagem run`; needs WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
///    MASTER_ADDR, MASTER_PORT; GROUP_RANK gives the node (else rank / LOCAL_WORLD_SIZE).
///    STRATAGEM_LAUNCHER=stratagem marks our own launcher; TORCHELASTIC_USE_AGENT_STORE and
///    TORCHELASTIC_RESTART_COUNT are honoured.
///  - SLURM_PROCID set: SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, the node's task count from
///    SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE, format "4(x2),3"); MASTER_ADDR must
///    be exported (Slurm has no such variable); MASTER_PORT defaults to 29500.
///  - OMPI_COMM_WORLD_RANK set: OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
///    OMPI_COMM_WORLD_LOCAL_SIZE; node = rank / local size (mpirun's default by-slot mapping);
///    MASTER_ADDR required, MASTER_PORT defaults to 29500.
///  - none of them: a single process (rank 0 of 1 on 127.0.0.1).
/// Throws SpecError naming the variable that is missing, not an integer, or contradicts another.
DistEnv parse_dist_env(const std::map<std::string, std::string>& vars);

/// The number of tasks Slurm places on node `node` given a SLURM_TASKS_PER_NODE value such as
/// "4(x2),3" (nodes 0 and 1 run 4, node 2 runs 3). Throws SpecError naming `variable`.
int slurm_tasks_on_node(const std::string& value, int node, const std::string& variable);

/// "rank 3/8 (local 1/4, node 1) via torchrun, master 10.0.0.1:29500"
std::string describe(const DistEnv& env);

}  // namespace stratagem::launch
