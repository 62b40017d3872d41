#pragma once

#include <string>
#include <vector>

// Which CPUs share a physical core (SMT siblings), from /sys/devices/system/cpu: ranks that
// wait for each other must not spin on a core the awaited rank needs, and `lockstep run`
// gives each worker a core of its own.
namespace lockstep {

/// The physical core of logical CPU `cpu` as "package:core"; the CPU itself where the
/// topology cannot be read (a CPU is then its own core).
const std::string& physical_core_of(int cpu);

/// Whether logical CPUs `a` and `b` are one physical core (the same CPU, or SMT siblings).
/// Lock-free after its first call, which reads the topology of every CPU: waiting ranks ask
/// it on every wait.
bool same_physical_core(int a, int b);

/// The CPUs this process may run on (its affinity mask), in increasing order.
std::vector<int> allowed_cpus();

/// "0-3,6": a CPU list as /proc/PID/status and taskset write it.
std::string cpu_list_text(const std::vector<int>& cpus);

/// Where `workers` workers go when each gets a physical core of its own: one CPU of a
/// distinct core each, taken in order from `allowed` (a Slurm allocation or a taskset is
/// respected), as mpirun binds by default. With fewer physical cores than workers in
/// `allowed`, no binding, and why.
struct CoreBinding {
  std::vector<int> cpus;    // per worker; empty: not bound
  std::string unbound_why;  // set when the workers could not have a core each
};
CoreBinding bind_to_cores(int workers, const std::vector<int>& allowed);

}  // namespace lockstep
