// A 4 KB all_reduce between 2 local processes as users start them: lockstep's public API
// under `lockstep run -n 2` against raw MPI_Allreduce under OpenMPI's `mpirun -n 2`, each
// launcher with its default placement. Run after `make build`:
//
//   build/bench/launcher_latency
//
// The two launches take turns (ABBA) for 9 pairs; each run prints its median time per call
// over windows of calls, and the parent prints the medians and the median per-pair ratio.
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "median.h"
#include "run_world.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using lockstep::bench::median;
using lockstep::bench::run_command;

constexpr int kFloats = 1024;  // 4 KB
const std::map<std::string, std::string> kRootMayRunMpi = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                           {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
constexpr int kWarmup = 2000, kWindows = 31, kCallsPerWindow = 1000, kPairs = 9;

// Median µs per call over windows of `call()`, as rank 0 writes it to `out`.
void time_calls(const std::function<void()>& call, int rank, const std::string& out) {
  for (int i = 0; i < kWarmup; ++i) call();
  std::vector<double> per_call;
  for (int window = 0; window < kWindows; ++window) {
    const auto start = Clock::now();
    for (int i = 0; i < kCallsPerWindow; ++i) call();
    per_call.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kCallsPerWindow);
  }
  if (rank == 0) std::ofstream(out) << median(per_call) << "\n";
}

int raw_mpi(const std::string& out) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<float> buffer(kFloats, 0.0f);
  time_calls([&] { MPI_Allreduce(MPI_IN_PLACE, buffer.data(), kFloats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, rank,
             out);
  MPI_Finalize();
  return 0;
}

int through_lockstep(const std::string& out) {
  lockstep::init();
  at::Tensor tensor = torch::zeros({kFloats});
  time_calls([&] { lockstep::all_reduce(tensor); }, lockstep::rank(), out);
  lockstep::shutdown();
  return 0;
}

double read_micros(const std::string& path) {
  double micros = 0;
  std::ifstream(path) >> micros;
  if (micros <= 0) {
    std::fprintf(stderr, "launcher_latency: no time in %s\n", path.c_str());
    std::exit(1);
  }
  return micros;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "mpi" && argc == 3) return raw_mpi(argv[2]);
  if (role == "lockstep" && argc == 3) return through_lockstep(argv[2]);

  const fs::path self = fs::canonical("/proc/self/exe");
  const std::string launcher = (self.parent_path().parent_path() / "tools" / "lockstep").string();
  const std::string out = (fs::temp_directory_path() / ("lockstep-latency-" + std::to_string(getpid()))).string();
  std::vector<double> mpi, ours;
  auto under_mpirun = [&] {
    if (run_command({"mpirun", "-n", "2", self.string(), "mpi", out}, kRootMayRunMpi) != 0) std::exit(1);
    mpi.push_back(read_micros(out));
    return mpi.back();
  };
  auto under_lockstep_run = [&] {
    if (run_command({launcher, "run", "-n", "2", "--", self.string(), "lockstep", out}) != 0) std::exit(1);
    ours.push_back(read_micros(out));
    return ours.back();
  };
  const double ratio = lockstep::bench::median_paired_ratio(kPairs, under_lockstep_run, under_mpirun);
  fs::remove(out);
  std::printf(
      "4 KB all_reduce, 2 local processes, median µs per call over %d runs each: lockstep::all_reduce under "
      "`lockstep run` %.2f, MPI_Allreduce under `mpirun` %.2f; lockstep / MPI, median of paired runs: %.2fx\n",
      kPairs, median(ours), median(mpi), ratio);
  std::printf("runs (lockstep, MPI):");
  for (size_t i = 0; i < ours.size(); ++i) std::printf(" (%.2f, %.2f)", ours[i], mpi[i]);
  std::printf("\n");
  return 0;
}
