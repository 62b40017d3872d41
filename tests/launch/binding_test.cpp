// `lockstep run --bind`: each worker's CPUs, as /proc/PID/status lists them, against the
// launcher's own.
#include <sched.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "job/cpu_topology.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::launch {
namespace {

using testing::contains;
using testing::run_process;

// Each rank's Cpus_allowed_list, as `lockstep run ARGS -- sh` prints it, by rank.
std::map<int, std::string> worker_cpus(const std::vector<std::string>& launcher_prefix,
                                       const std::vector<std::string>& args, std::string* output = nullptr) {
  std::vector<std::string> command = launcher_prefix;
  command.insert(command.end(), {LOCKSTEP_TOOL, "run"});
  command.insert(command.end(), args.begin(), args.end());
  command.insert(command.end(),
                 {"--", "/bin/sh", "-c", "echo \"cpus $RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)\""});
  const auto ran = run_process(command);
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  if (output != nullptr) *output = ran.output;
  std::map<int, std::string> cpus;
  std::istringstream lines(ran.output);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("cpus ");
    if (at == std::string::npos) continue;
    std::istringstream fields(line.substr(at + 5));
    int rank = -1;
    std::string list;
    fields >> rank >> list;
    cpus[rank] = list;
  }
  return cpus;
}

int physical_cores(const std::vector<int>& cpus) {
  std::set<std::string> cores;
  for (int cpu : cpus) cores.insert(physical_core_of(cpu));
  return static_cast<int>(cores.size());
}

TEST(Binding, CorePinsEachWorkerToADistinctCpuInsideTheLaunchersMask) {
  const auto mine = allowed_cpus();
  if (physical_cores(mine) < 2)
    GTEST_SKIP() << "this machine gives the tests " << physical_cores(mine) << " physical core";
  const auto cpus = worker_cpus({}, {"-n", "2", "--bind", "core"});
  ASSERT_EQ(cpus.size(), 2u);
  std::set<std::string> distinct;
  for (const auto& [rank, list] : cpus) {
    EXPECT_EQ(list.find_first_of(",-"), std::string::npos) << "rank " << rank << " may run on " << list;
    EXPECT_NE(std::find(mine.begin(), mine.end(), std::stoi(list)), mine.end())
        << list << " is outside " << cpu_list_text(mine);
    distinct.insert(physical_core_of(std::stoi(list)));
  }
  EXPECT_EQ(distinct.size(), 2u) << "two workers on one physical core";
  EXPECT_EQ(worker_cpus({}, {"-n", "2"}), cpus) << "--bind core is the default";
}

// The check a waiting rank makes on every wait agrees with the topology as /sys names it.
TEST(Binding, SamePhysicalCoreAgreesWithTheTopologyForEveryPairOfCpus) {
  const auto cpus = allowed_cpus();
  for (int a : cpus) {
    for (int b : cpus) {
      EXPECT_EQ(same_physical_core(a, b), physical_core_of(a) == physical_core_of(b)) << "CPUs " << a << " and " << b;
    }
  }
  EXPECT_TRUE(same_physical_core(cpus.front(), cpus.front()));
  EXPECT_FALSE(same_physical_core(cpus.front(), -1)) << "an unknown CPU shares no core";
}

TEST(Binding, NoneLeavesEachWorkerTheLaunchersMask) {
  const std::string mine = cpu_list_text(allowed_cpus());
  for (const auto& [rank, list] : worker_cpus({}, {"-n", "2", "--bind", "none"}))
    EXPECT_EQ(list, mine) << "rank " << rank;
}

// Under `taskset -c 0` (a Slurm allocation of one CPU) two workers cannot have a core each.
TEST(Binding, AMaskNarrowerThanTheWorkersFallsBackToNoneInOneLine) {
  std::string output;
  const auto cpus = worker_cpus({"taskset", "-c", "0"}, {"-n", "2", "--bind", "core"}, &output);
  for (const auto& [rank, list] : cpus) EXPECT_EQ(list, "0") << "rank " << rank;
  EXPECT_TRUE(contains(output,
                       "lockstep run: --bind core: CPU(s) 0 hold 1 physical core(s), fewer than the 2 workers; "
                       "they are not bound (as --bind none)\n"))
      << output;
}

}  // namespace
}  // namespace lockstep::launch
