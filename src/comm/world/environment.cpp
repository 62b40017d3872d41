#include "comm/world/environment.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "comm/transports/device_call.h"
#include "comm/transports/device_transports.h"
#include "job/job_identity.h"
#include "job/slurm_step.h"
#include "job/tcp_probe.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

// A setting and where it came from, so errors can name the variable to fix.
struct Setting {
  int value;
  std::string source;
};

int parse_int(const std::string& text, const std::string& source) {
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == text.size()) return static_cast<int>(value);
  } catch (const std::exception&) {
  }
  throw ConfigError("lockstep: " + source + "='" + text + "' is not an integer");
}

// The first of `names` that is set wins; the others that are set must agree with it,
// except `lenient` ones (Slurm's, which mpirun inside an allocation legitimately leaves
// at the batch script's values).
std::optional<Setting> first_agreeing(const EnvLookup& env, const std::vector<std::string>& names,
                                      const std::vector<std::string>& lenient = {}) {
  std::optional<Setting> chosen;
  for (const auto& name : names) {
    const auto text = env(name);
    if (!text) continue;
    const int value = parse_int(*text, name);
    if (!chosen) {
      chosen = Setting{value, name};
    } else if (value != chosen->value && std::find(lenient.begin(), lenient.end(), name) == lenient.end()) {
      throw ConfigError("lockstep: conflicting settings: " + chosen->source + "=" + std::to_string(chosen->value) +
                        " but " + name + "=" + std::to_string(value) +
                        "; unset the one that does not belong to "
                        "this launch");
    }
  }
  return chosen;
}

std::optional<Setting> pick(const std::optional<int>& option, const std::string& option_name, const EnvLookup& env,
                            const std::vector<std::string>& names) {
  if (option) return Setting{*option, "InitOptions::" + option_name};
  return first_agreeing(env, names, {names.back()});
}

bool parse_bool(const std::string& text, const std::string& source) {
  if (text == "1" || text == "true" || text == "True" || text == "yes") return true;
  if (text == "0" || text == "false" || text == "False" || text == "no" || text.empty()) {
    return false;
  }
  throw ConfigError("lockstep: " + source + "='" + text + "' must be 1 or 0");
}

Backend parse_backend(const std::string& text) {
  if (text == "gloo") return Backend::Gloo;
  if (text == "mpi") return Backend::Mpi;
  if (text == "nccl") return Backend::Nccl;
  if (text == "auto" || text.empty()) return Backend::Auto;
  throw ConfigError("lockstep: LOCKSTEP_BACKEND='" + text +
                    "' must be auto, gloo or mpi (or nccl, which means "
                    "LOCKSTEP_DEVICE_BACKEND=nccl)");
}

DeviceBackend parse_device_backend(const std::string& text) {
  if (text == "staged") return DeviceBackend::Staged;
  if (text == "nccl") return DeviceBackend::Nccl;
  if (text == "auto" || text.empty()) return DeviceBackend::Auto;
  throw ConfigError("lockstep: LOCKSTEP_DEVICE_BACKEND='" + text + "' must be auto, staged or nccl");
}

// LOCKSTEP_DEBUG: "detail" (or 1) compares every call, as TORCH_DISTRIBUTED_DEBUG=DETAIL does.
bool parse_debug(const std::string& text) {
  if (text == "detail" || text == "DETAIL") return true;
  if (text == "off" || text == "OFF") return false;
  try {
    return parse_bool(text, "LOCKSTEP_DEBUG");
  } catch (const ConfigError&) {
    throw ConfigError("lockstep: LOCKSTEP_DEBUG='" + text + "' must be detail (or 1) or off (or 0)");
  }
}

InitMethod parse_method(const std::string& text) {
  if (text == "tcp") return InitMethod::Tcp;
  if (text == "file") return InitMethod::File;
  if (text == "mpi") return InitMethod::Mpi;
  if (text == "auto" || text.empty()) return InitMethod::Auto;
  throw ConfigError("lockstep: LOCKSTEP_INIT_METHOD='" + text + "' must be tcp, file, mpi or auto");
}

std::chrono::milliseconds parse_timeout(const std::string& text) {
  try {
    size_t used = 0;
    const double seconds = std::stod(text, &used);
    if (used == text.size() && seconds > 0) {
      return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    }
  } catch (const std::exception&) {
  }
  throw ConfigError("lockstep: LOCKSTEP_TIMEOUT='" + text + "' must be a positive number of seconds");
}

// Returns the srun step the rank came from, if it came from SLURM_PROCID: the step then also
// gives the local ranks, the node and (settle_rendezvous) the store's address.
std::optional<SlurmStep> settle_world(WorldSpec& spec, const InitOptions& options, const EnvLookup& env) {
  const auto rank =
      pick(options.rank(), "rank", env, {"LOCKSTEP_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"});
  const auto size = pick(options.world_size(), "world_size", env,
                         {"LOCKSTEP_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"});
  if (rank.has_value() != size.has_value()) {
    const Setting& known = rank ? *rank : *size;
    throw ConfigError("lockstep: " + known.source + " is set but the " + std::string(rank ? "world size" : "rank") +
                      " is not; set both (e.g. RANK and WORLD_SIZE)");
  }
  if (!size) return std::nullopt;  // no environment at all: a world of one
  // Before the checks below, so that a Slurm variable that does not fit is named alike on every rank.
  const auto step = rank->source == "SLURM_PROCID" ? slurm_step(env) : std::nullopt;
  if (size->value < 1) {
    throw ConfigError("lockstep: " + size->source + "=" + std::to_string(size->value) + " must be at least 1");
  }
  if (rank->value < 0 || rank->value >= size->value) {
    throw ConfigError("lockstep: " + rank->source + "=" + std::to_string(rank->value) + " is out of range for " +
                      size->source + "=" + std::to_string(size->value) + " (ranks are 0.." +
                      std::to_string(size->value - 1) + ")");
  }
  spec.rank = rank->value;
  spec.world_size = size->value;

  const auto local_rank = pick(options.local_rank(), "local_rank", env,
                               {"LOCKSTEP_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  auto local_size = pick(options.local_world_size(), "local_world_size", env,
                         {"LOCKSTEP_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"});
  if (step && !local_size) local_size = Setting{step->local_world_size(), "SLURM_STEP_TASKS_PER_NODE"};
  if (step) spec.node_rank = step->node_rank;
  if (local_rank && local_size) {
    if (local_size->value < 1 || local_size->value > spec.world_size || local_rank->value < 0 ||
        local_rank->value >= local_size->value) {
      throw ConfigError("lockstep: " + local_rank->source + "=" + std::to_string(local_rank->value) + " and " +
                        local_size->source + "=" + std::to_string(local_size->value) + " do not fit a world of " +
                        std::to_string(spec.world_size));
    }
    spec.local_rank = local_rank->value;
    spec.local_world_size = local_size->value;
  }
  return step;
}

// The host backend and the device backend, each with one meaning. "nccl" as the backend
// (the setting that came before the device backend) means Auto's host backend with NCCL
// for CUDA tensors.
void settle_backends(WorldSpec& spec, const InitOptions& options, const EnvLookup& env) {
  Backend host = options.backend();
  if (host == Backend::Threads) {
    throw ConfigError(
        "lockstep::init: Backend::Threads is the backend of lockstep::run_replicas, "
        "which makes its own group; init() takes Backend::Gloo, Mpi or Auto");
  }
  if (host == Backend::Auto) host = parse_backend(env("LOCKSTEP_BACKEND").value_or(""));
  DeviceBackend device = options.device_backend();
  if (device == DeviceBackend::Auto) device = parse_device_backend(env("LOCKSTEP_DEVICE_BACKEND").value_or(""));
  if (host == Backend::Nccl) {
    if (device == DeviceBackend::Staged) {
      throw ConfigError(
          "lockstep: the backend nccl (which means the device backend nccl) conflicts with the device "
          "backend staged; choose one");
    }
    device = DeviceBackend::Nccl;
    host = Backend::Auto;
  }
  spec.backend = host != Backend::Auto ? host : spec.launched_by_mpirun ? Backend::Mpi : Backend::Gloo;
  spec.device_backend = device;
  if (device == DeviceBackend::Nccl && !built_with_nccl()) {
    throw ConfigError(
        std::string("lockstep: the device backend nccl needs lockstep built against a libtorch with "
                    "CUDA and NCCL (docs/GPU.md), but this one ") +
        (built_with_cuda() ? "found no NCCL beside its libtorch" : "was built against a libtorch without CUDA") +
        "; the device backend staged moves CUDA tensors through host memory");
  }
}

// Inside an srun step rank 0 runs on the step's first node: the store is there, at a port
// of the job's and step's own, unless MASTER_ADDR or MASTER_PORT say otherwise.
void meet_on_first_node(WorldSpec& spec, const InitOptions& options, const EnvLookup& env, const SlurmStep& step) {
  if (!spec.master_addr.empty() || !spec.file_path.empty() || spec.backend == Backend::Mpi) return;
  spec.master_addr = step.first_node();
  if (!options.master_port() && !env("MASTER_PORT")) spec.master_port = step.port();
  if (auto why = why_unresolvable(spec.master_addr)) {
    const std::string variable = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    throw ConfigError("lockstep: " + variable + "='" + env(variable).value_or("") + "': its first node '" +
                      spec.master_addr + "', where rank 0 hosts the store, does not resolve (" + *why +
                      "); set MASTER_ADDR to its address");
  }
}

void settle_rendezvous(WorldSpec& spec, const InitOptions& options, const EnvLookup& env,
                       const std::optional<SlurmStep>& step) {
  spec.launched_by_mpirun = env("OMPI_COMM_WORLD_SIZE").has_value();
  settle_backends(spec, options, env);

  if (auto addr = options.master_addr() ? options.master_addr() : env("MASTER_ADDR")) {
    spec.master_addr = *addr;
  }
  if (options.master_port()) {
    spec.master_port = *options.master_port();
  } else if (auto port = env("MASTER_PORT")) {
    spec.master_port = parse_int(*port, "MASTER_PORT");
  }
  if (spec.master_port < 1 || spec.master_port > 65535) {
    throw ConfigError("lockstep: MASTER_PORT=" + std::to_string(spec.master_port) + " is not a TCP port (1..65535)");
  }
  spec.store_hosted_by_launcher =
      parse_bool(env("LOCKSTEP_USE_AGENT_STORE").value_or(""), "LOCKSTEP_USE_AGENT_STORE") ||
      parse_bool(env("TORCHELASTIC_USE_AGENT_STORE").value_or(""), "TORCHELASTIC_USE_AGENT_STORE");
  if (auto path = options.file_path() ? options.file_path() : env("LOCKSTEP_INIT_FILE")) {
    spec.file_path = *path;
  }
  if (step && spec.world_size > 1) meet_on_first_node(spec, options, env, *step);
  spec.socket_ifname = env("LOCKSTEP_SOCKET_IFNAME").value_or(env("GLOO_SOCKET_IFNAME").value_or(""));

  spec.method = options.method();
  if (spec.method == InitMethod::Auto) spec.method = parse_method(env("LOCKSTEP_INIT_METHOD").value_or(""));
  if (spec.method == InitMethod::Auto) {
    if (spec.backend == Backend::Mpi) {
      spec.method = InitMethod::Mpi;
    } else if (!spec.master_addr.empty()) {
      spec.method = InitMethod::Tcp;
    } else if (!spec.file_path.empty()) {
      spec.method = InitMethod::File;
    } else if (spec.world_size > 1) {
      throw ConfigError("lockstep: WORLD_SIZE=" + std::to_string(spec.world_size) +
                        " but no way to meet the other ranks: set MASTER_ADDR and MASTER_PORT "
                        "(TCP store), LOCKSTEP_INIT_FILE (shared file store), or launch with "
                        "`lockstep run` or mpirun");
    }
  }
  if (spec.backend == Backend::Mpi && spec.method != InitMethod::Mpi) {
    throw ConfigError("lockstep: the mpi backend finds its ranks through mpirun; init method " +
                      to_string(spec.method) + " does not apply (use the gloo backend for it)");
  }
  if (spec.method == InitMethod::Mpi && spec.backend != Backend::Mpi) {
    throw ConfigError("lockstep: init method mpi needs the mpi backend (LOCKSTEP_BACKEND=mpi)");
  }
  if (spec.method == InitMethod::Tcp && spec.master_addr.empty()) {
    throw ConfigError("lockstep: the TCP store needs MASTER_ADDR (and MASTER_PORT)");
  }
  if (spec.method == InitMethod::File && spec.file_path.empty()) {
    throw ConfigError("lockstep: the file store needs LOCKSTEP_INIT_FILE or InitOptions::file_path");
  }
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

WorldSpec discover_world(const InitOptions& options, const EnvLookup& env) {
  WorldSpec spec;
  const auto step = settle_world(spec, options, env);
  settle_rendezvous(spec, options, env, step);
  if (options.timeout()) {
    spec.timeout = *options.timeout();
  } else if (auto text = env("LOCKSTEP_TIMEOUT")) {
    spec.timeout = parse_timeout(*text);
  }
  if (spec.timeout.count() <= 0) throw ConfigError("lockstep: InitOptions::timeout must be positive");
  spec.debug = options.debug() ? *options.debug() : parse_debug(env("LOCKSTEP_DEBUG").value_or(""));
  spec.shared_memory = options.shared_memory() ? *options.shared_memory()
                                               : parse_bool(env("LOCKSTEP_SHM").value_or("1"), "LOCKSTEP_SHM");
  if (auto node = env("GROUP_RANK")) spec.node_rank = parse_int(*node, "GROUP_RANK");
  if (auto restarts = env("LOCKSTEP_RESTART_COUNT"))
    spec.restart_count = parse_int(*restarts, "LOCKSTEP_RESTART_COUNT");
  if (auto reason = env("LOCKSTEP_RESTART_REASON")) spec.restart_reason = *reason;
  spec.job_id = job_id_of(env);
  spec.heartbeat = parse_bool(env("LOCKSTEP_HEARTBEAT").value_or(""), "LOCKSTEP_HEARTBEAT");
  spec.member_id = spec.rank;
  if (auto member = env("LOCKSTEP_MEMBER_ID")) spec.member_id = parse_int(*member, "LOCKSTEP_MEMBER_ID");
  if (auto incarnation = env("LOCKSTEP_INCARNATION"))
    spec.incarnation = parse_int(*incarnation, "LOCKSTEP_INCARNATION");
  return spec;
}

}  // namespace lockstep
