#include "engine/launch/dist_env.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "engine/scenario/error.hpp"

extern char** environ;

namespace stratagem::launch {
namespace {

using Vars = std::map<std::string, std::string>;

const std::string* find(const Vars& vars, const std::string& name) {
  const auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

int to_int(const std::string& name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || v < INT_MIN ||
      v > INT_MAX) {
    throw SpecError(name, "expected an integer, got \"" + text + "\"");
  }
  return static_cast<int>(v);
}

int require_int(const Vars& vars, const std::string& name, const std::string& why) {
  const auto* v = find(vars, name);
  if (!v) throw SpecError(name, "not set (" + why + ")");
  return to_int(name, *v);
}

int optional_int(const Vars& vars, const std::string& name, int fallback) {
  const auto* v = find(vars, name);
  return v ? to_int(name, *v) : fallback;
}

std::string master_addr(const Vars& vars, const std::string& launcher) {
  const auto* v = find(vars, "MASTER_ADDR");
  if (!v || v->empty()) {
    throw SpecError("MASTER_ADDR",
                    "not set; " + launcher +
                        " does not provide the rendezvous host, export MASTER_ADDR=<host of "
                        "rank 0> (for Slurm: $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
                        "| head -n 1))");
  }
  return *v;
}

void check(DistEnv& env, const std::string& rank_var, const std::string& size_var,
           const std::string& local_rank_var, const std::string& local_size_var) {
  if (env.world_size < 1) {
    throw SpecError(size_var, "must be at least 1, got " + std::to_string(env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw SpecError(rank_var, std::to_string(env.rank) + " is outside [0, " + size_var + "=" +
                                  std::to_string(env.world_size) + ")");
  }
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    throw SpecError(local_size_var, std::to_string(env.local_world_size) + " is outside [1, " +
                                        size_var + "=" + std::to_string(env.world_size) + "]");
  }
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    throw SpecError(local_rank_var, std::to_string(env.local_rank) + " is outside [0, " +
                                        local_size_var + "=" +
                                        std::to_string(env.local_world_size) + ")");
  }
  if (env.local_rank > env.rank) {
    throw SpecError(local_rank_var, std::to_string(env.local_rank) + " exceeds " + rank_var + "=" +
                                        std::to_string(env.rank));
  }
  if (env.node_rank < 0) {
    throw SpecError("node rank", "negative: " + std::to_string(env.node_rank));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    throw SpecError("MASTER_PORT", std::to_string(env.master_port) + " is not a TCP port");
  }
}

DistEnv from_torchrun(const Vars& vars) {
  const std::string why = "torchrun sets it with RANK";
  DistEnv env;
  env.launcher = "torchrun";
  if (const auto* l = find(vars, "STRATAGEM_LAUNCHER"); l && *l == "stratagem") {
    env.launcher = "stratagem";
  }
  env.rank = require_int(vars, "RANK", why);
  env.world_size = require_int(vars, "WORLD_SIZE", why);
  env.local_rank = require_int(vars, "LOCAL_RANK", why);
  env.local_world_size = require_int(vars, "LOCAL_WORLD_SIZE", why);
  env.node_rank = optional_int(vars, "GROUP_RANK", env.rank / std::max(env.local_world_size, 1));
  const auto* addr = find(vars, "MASTER_ADDR");
  if (!addr || addr->empty()) throw SpecError("MASTER_ADDR", "not set (" + why + ")");
  env.master_addr = *addr;
  env.master_port = require_int(vars, "MASTER_PORT", why);
  if (const auto* a = find(vars, "TORCHELASTIC_USE_AGENT_STORE")) {
    env.use_agent_store = *a == "True" || *a == "true" || *a == "1";
  }
  env.restart_count = optional_int(vars, "TORCHELASTIC_RESTART_COUNT", 0);
  check(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return env;
}

DistEnv from_slurm(const Vars& vars) {
  const std::string why = "srun sets it with SLURM_PROCID";
  DistEnv env;
  env.launcher = "slurm";
  env.rank = require_int(vars, "SLURM_PROCID", why);
  env.world_size = require_int(vars, "SLURM_NTASKS", why);
  env.local_rank = require_int(vars, "SLURM_LOCALID", why);
  env.node_rank = require_int(vars, "SLURM_NODEID", why);
  std::string per_node_var = "SLURM_STEP_TASKS_PER_NODE";
  const auto* per_node = find(vars, per_node_var);
  if (!per_node) {
    per_node_var = "SLURM_TASKS_PER_NODE";
    per_node = find(vars, per_node_var);
  }
  if (!per_node) throw SpecError("SLURM_TASKS_PER_NODE", "not set (" + why + ")");
  env.local_world_size = slurm_tasks_on_node(*per_node, env.node_rank, per_node_var);
  env.master_addr = master_addr(vars, "Slurm");
  env.master_port = optional_int(vars, "MASTER_PORT", kDefaultMasterPort);
  check(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", per_node_var);
  return env;
}

DistEnv from_mpirun(const Vars& vars) {
  const std::string why = "mpirun sets it with OMPI_COMM_WORLD_RANK";
  DistEnv env;
  env.launcher = "mpirun";
  env.rank = require_int(vars, "OMPI_COMM_WORLD_RANK", why);
  env.world_size = require_int(vars, "OMPI_COMM_WORLD_SIZE", why);
  env.local_rank = require_int(vars, "OMPI_COMM_WORLD_LOCAL_RANK", why);
  env.local_world_size = require_int(vars, "OMPI_COMM_WORLD_LOCAL_SIZE", why);
  if (env.local_world_size > 0) env.node_rank = env.rank / env.local_world_size;
  env.master_addr = master_addr(vars, "mpirun");
  env.master_port = optional_int(vars, "MASTER_PORT", kDefaultMasterPort);
  check(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE");
  return env;
}

}  // namespace

int slurm_tasks_on_node(const std::string& value, int node, const std::string& variable) {
  // Comma-separated entries "N" or "N(xK)": N tasks on each of the next K nodes.
  int first = 0;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    int count = 0;
    int repeat = 1;
    const auto paren = item.find('(');
    if (paren == std::string::npos) {
      count = to_int(variable, item);
    } else {
      if (item.size() < paren + 4 || item[paren + 1] != 'x' || item.back() != ')') {
        throw SpecError(variable, "cannot read \"" + item + "\" in \"" + value + "\"");
      }
      count = to_int(variable, item.substr(0, paren));
      repeat = to_int(variable, item.substr(paren + 2, item.size() - paren - 3));
    }
    if (count < 1 || repeat < 1) {
      throw SpecError(variable, "non-positive count in \"" + value + "\"");
    }
    if (node < first + repeat) return count;
    first += repeat;
  }
  throw SpecError(variable, "\"" + value + "\" describes " + std::to_string(first) +
                                " node(s) but this is node " + std::to_string(node));
}

DistEnv parse_dist_env(const std::map<std::string, std::string>& vars) {
  if (vars.count("RANK")) return from_torchrun(vars);
  if (vars.count("SLURM_PROCID")) return from_slurm(vars);
  if (vars.count("OMPI_COMM_WORLD_RANK")) return from_mpirun(vars);
  for (const char* name : {"WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
    if (vars.count(name)) {
      throw SpecError("RANK",
                      std::string("not set although ") + name + " is (set both, as torchrun does)");
    }
  }
  DistEnv env;
  env.launcher = "none";
  if (const auto* a = find(vars, "MASTER_ADDR"); a && !a->empty()) env.master_addr = *a;
  env.master_port = optional_int(vars, "MASTER_PORT", kDefaultMasterPort);
  check(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return env;
}

DistEnv read_dist_env() {
  Vars vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return parse_dist_env(vars);
}

std::string describe(const DistEnv& env) {
  std::ostringstream s;
  s << "rank " << env.rank << "/" << env.world_size << " (local " << env.local_rank << "/"
    << env.local_world_size << ", node " << env.node_rank << ") via " << env.launcher << ", master "
    << env.master_addr << ":" << env.master_port;
  return s.str();
}

}  // namespace stratagem::launch
