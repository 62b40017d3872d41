// lockstep's all_reduce next to the raw engine it drives, on the same buffers, with 2 local
// processes:
//
//   bench/allreduce
//
// runs itself twice: under mpirun -n 2 (raw MPI_Allreduce vs lockstep over MPI), then as 2
// gloo ranks meeting through a file store (raw gloo vs lockstep over gloo; no MPI in those
// processes, whose busy-polling would starve gloo's socket threads). Each pair prints median
// time per call and algorithm bandwidth (bytes / time) for every message size, and this
// parent prints the joined table.
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <torch/torch.h>

#include "comm/rendezvous.h"
#include "lockstep/lockstep.h"

namespace {

using Clock = std::chrono::steady_clock;
using Variant = std::function<void()>;
namespace fs = std::filesystem;

constexpr size_t kSmallest = 4 << 10;
constexpr size_t kLargest = 64 << 20;
constexpr int kRounds = 101;
// lockstep asks gloo for this algorithm; the raw baseline uses the same.
constexpr auto kGlooAlgorithm = gloo::AllreduceOptions::Algorithm::BCUBE;

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

struct Timing {
  double raw;       // median seconds per call
  double ours;
  double overhead;  // median over rounds of (ours - raw) in the same round
  double relative;  // median over rounds of ours / raw - 1
};

// Raw and lockstep take turns in blocks of calls, round after round, so that machine noise
// hits them alike; comparing them within each round cancels most of what noise remains.
Timing time_side_by_side(const Variant& raw, const Variant& ours, int calls_per_block,
                         const std::function<void()>& barrier) {
  auto seconds_per_call = [&](const Variant& variant) {
    barrier();
    const auto start = Clock::now();
    for (int i = 0; i < calls_per_block; ++i) variant();
    return std::chrono::duration<double>(Clock::now() - start).count() / calls_per_block;
  };
  raw();  // warm-up
  ours();
  std::vector<double> raws, ourses, overheads, relatives;
  for (int round = 0; round < kRounds; ++round) {
    raws.push_back(seconds_per_call(raw));
    ourses.push_back(seconds_per_call(ours));
    overheads.push_back(ourses.back() - raws.back());
    relatives.push_back(ourses.back() / raws.back() - 1);
  }
  return {median(raws), median(ourses), median(overheads), median(relatives)};
}

int calls_per_block(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((16u << 20) / bytes, 1, 100));
}

// Times raw and lockstep for every size; rank 0 writes one line of numbers per size.
void measure(const std::string& out_path, int rank, const std::function<void()>& barrier,
             const std::function<void(float*, int64_t)>& raw,
             const std::function<void(torch::Tensor&)>& ours) {
  std::ofstream out;
  if (rank == 0) out.open(out_path);
  for (size_t bytes = kSmallest; bytes <= kLargest; bytes *= 4) {
    const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
    torch::Tensor buffer = torch::zeros({count});  // zeros stay zeros: no overflow, no denormals
    const Timing t = time_side_by_side([&] { raw(buffer.data_ptr<float>(), count); }, [&] { ours(buffer); },
                                       calls_per_block(bytes), barrier);
    if (rank == 0) out << bytes << " " << t.raw << " " << t.ours << " " << t.overhead << " " << t.relative << std::endl;
  }
}

int mpi_pair(const std::string& out_path) {
  lockstep::init(lockstep::InitOptions().backend(lockstep::Backend::Mpi));
  measure(out_path, lockstep::rank(), [] { MPI_Barrier(MPI_COMM_WORLD); },
          [](float* data, int64_t count) {
            MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          },
          [](torch::Tensor& t) { lockstep::all_reduce(t); });
  lockstep::shutdown();
  return 0;
}

int gloo_pair(const std::string& out_path, int rank, const std::string& dir) {
  fs::create_directories(dir + "/raw");
  gloo::rendezvous::FileStore store(dir + "/raw");
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
  context->connectFullMesh(store, device);

  // The same interface as the raw context: only lockstep's layer differs.
  lockstep::WorldSpec spec;
  spec.method = lockstep::InitMethod::File;
  spec.rank = rank;
  spec.world_size = 2;
  spec.file_path = dir + "/lockstep";
  spec.socket_ifname = "lo";
  auto group = lockstep::join_group(spec).communicator;

  measure(out_path, rank,
          [&] {
            gloo::BarrierOptions opts(context);
            gloo::barrier(opts);
          },
          [&](float* data, int64_t count) {
            gloo::AllreduceOptions opts(context);
            opts.setOutput(data, count);
            opts.setAlgorithm(kGlooAlgorithm);
            opts.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            gloo::allreduce(opts);
          },
          [&](torch::Tensor& t) { group->all_reduce({t}, lockstep::ReduceOp::Sum, /*blocking=*/true); });
  return 0;
}

int run(std::vector<std::string> argv, const std::map<std::string, std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror(args[0]);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::map<size_t, Timing> read_results(const std::string& path) {
  std::map<size_t, Timing> rows;
  std::ifstream in(path);
  size_t bytes;
  Timing t;
  while (in >> bytes >> t.raw >> t.ours >> t.overhead >> t.relative) rows[bytes] = t;
  return rows;
}

std::string size_name(size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MB" : std::to_string(bytes >> 10) + " KB";
}

std::string row(size_t bytes, const Timing& t) {
  char text[200];
  std::snprintf(text, sizeof(text), "%.1f | %.1f | %+.1f µs (%+.1f%%) | %.2f | %.2f", t.raw * 1e6, t.ours * 1e6,
                t.overhead * 1e6, 100 * t.relative, bytes / t.raw / 1e9, bytes / t.ours / 1e9);
  return text;
}

int parent(const std::string& self) {
  char pattern[] = "/tmp/lockstep-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::map<std::string, std::string> root_ok = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  if (run({"mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", self, "mpi", dir + "/mpi.txt"},
          root_ok) != 0) {
    return 1;
  }
  const pid_t second = fork();
  if (second == 0) _exit(run({self, "gloo", dir + "/gloo.txt", "1", dir}));
  const int first = run({self, "gloo", dir + "/gloo.txt", "0", dir});
  int status = 0;
  waitpid(second, &status, 0);
  if (first != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;

  const auto mpi = read_results(dir + "/mpi.txt");
  const auto gloo = read_results(dir + "/gloo.txt");
  std::printf("| size | MPI µs | lockstep MPI µs | overhead | MPI GB/s | lockstep MPI GB/s "
              "| gloo µs | lockstep gloo µs | overhead | gloo GB/s | lockstep gloo GB/s |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& [bytes, t] : mpi) {
    std::printf("| %s | %s | %s |\n", size_name(bytes).c_str(), row(bytes, t).c_str(),
                row(bytes, gloo.at(bytes)).c_str());
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "mpi" && argc == 3) return mpi_pair(argv[2]);
  if (role == "gloo" && argc == 5) return gloo_pair(argv[2], std::atoi(argv[3]), argv[4]);
  return parent(fs::canonical("/proc/self/exe"));
}
