// lockstep's all_reduce next to the raw engines it drives, on the same buffers, with 2 local
// processes:
//
//   bench/allreduce
//
// runs itself twice: under mpirun -n 2 (raw MPI_Allreduce, lockstep over MPI, lockstep over
// shared memory), then as 2 ranks meeting through a file store (raw gloo, lockstep over gloo,
// lockstep over shared memory; no MPI in those processes, whose busy-polling would starve
// gloo's socket threads). Variants take turns on every size, and the parent prints median
// time per call, algorithm bandwidth (bytes / time), and the median per-round ratio of
// lockstep's time to the raw engine's; then the speed of the element-wise sums.
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

#include "comm/groups/communicator.h"
#include "comm/groups/connect_group.h"
#include "comm/transports/gloo_compat.h"
#include "comm/transports/mpi_transport.h"
#include "comm/transports/reduce_kernels.h"
#include "comm/world/world.h"
#include "lockstep/lockstep.h"
#include "median.h"
#include "run_world.h"

namespace {

using lockstep::bench::median;
using lockstep::bench::run_command;

using Clock = std::chrono::steady_clock;
using Variant = std::function<void()>;
namespace fs = std::filesystem;

constexpr size_t kSmallest = 4 << 10;
constexpr size_t kLargest = 64 << 20;
constexpr int kRounds = 101;
// lockstep asks gloo for this algorithm; the raw baseline uses the same.
constexpr auto kGlooAlgorithm = gloo::AllreduceOptions::Algorithm::BCUBE;

// Median seconds per call of each variant, and of each variant's time over the first's
// (the raw engine's) within the same round.
struct Timing {
  std::vector<double> seconds;
  std::vector<double> ratio;
};

// The variants take turns in blocks of calls, round after round, so that machine noise
// hits them alike; comparing them within each round cancels most of what noise remains.
Timing time_side_by_side(const std::vector<Variant>& variants, int calls_per_block,
                         const std::function<void()>& barrier) {
  auto seconds_per_call = [&](const Variant& variant) {
    barrier();
    const auto start = Clock::now();
    for (int i = 0; i < calls_per_block; ++i) variant();
    return std::chrono::duration<double>(Clock::now() - start).count() / calls_per_block;
  };
  for (const auto& variant : variants) variant();  // warm-up
  const size_t n = variants.size();
  std::vector<std::vector<double>> seconds(n), ratios(n);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t v = 0; v < n; ++v) seconds[v].push_back(seconds_per_call(variants[v]));
    for (size_t v = 0; v < n; ++v) ratios[v].push_back(seconds[v].back() / seconds[0].back());
  }
  Timing timing;
  for (size_t v = 0; v < n; ++v) {
    timing.seconds.push_back(median(seconds[v]));
    timing.ratio.push_back(median(ratios[v]));
  }
  return timing;
}

int calls_per_block(size_t bytes) { return static_cast<int>(std::clamp<size_t>((16u << 20) / bytes, 1, 100)); }

// Times every variant for every size; rank 0 writes one line of numbers per size: the size,
// then each variant's seconds and ratio. `prepare` runs on every rank before each size.
void measure(const std::string& out_path, int rank, const std::function<void()>& barrier,
             const std::function<void(float*, int64_t)>& raw,
             const std::vector<std::function<void(torch::Tensor&)>>& ours,
             const std::function<void(int64_t count)>& prepare = nullptr) {
  std::ofstream out;
  if (rank == 0) out.open(out_path);
  for (size_t bytes = kSmallest; bytes <= kLargest; bytes *= 4) {
    const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
    torch::Tensor buffer = torch::zeros({count});  // zeros stay zeros: no overflow, no denormals
    if (prepare) prepare(count);
    std::vector<Variant> variants{[&] { raw(buffer.data_ptr<float>(), count); }};
    for (const auto& variant : ours) variants.push_back([&] { variant(buffer); });
    const Timing t = time_side_by_side(variants, calls_per_block(bytes), barrier);
    if (rank != 0) continue;
    out << bytes;
    for (size_t v = 0; v < variants.size(); ++v) out << " " << t.seconds[v] << " " << t.ratio[v];
    out << std::endl;
  }
}

// A lockstep group on its own world, as init() would make it, with shared memory on or off.
struct Group {
  std::shared_ptr<lockstep::World> world;
  std::unique_ptr<lockstep::Communicator> communicator;

  explicit Group(const lockstep::WorldSpec& spec) : world(lockstep::join_world(spec)) {
    std::vector<int> everyone;
    for (int r = 0; r < spec.world_size; ++r) everyone.push_back(r);
    auto transports = lockstep::connect_group(
        *world, everyone, "world", [&](const std::string& mine) { return world->gather("world/gather", mine); });
    communicator = std::make_unique<lockstep::Communicator>(std::move(transports), spec.timeout, false);
  }
  void all_reduce(torch::Tensor& t) { communicator->all_reduce({t}, lockstep::ReduceOp::Sum, true); }
};

lockstep::WorldSpec file_spec(int rank, const std::string& dir, bool shared_memory) {
  lockstep::WorldSpec spec;
  spec.method = lockstep::InitMethod::File;
  spec.rank = rank;
  spec.world_size = 2;
  spec.file_path = dir;
  spec.socket_ifname = "lo";
  spec.shared_memory = shared_memory;
  return spec;
}

int mpi_pair(const std::string& out_path, const std::string& dir) {
  int rank = 0;
  lockstep::start_mpi();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  lockstep::WorldSpec spec;
  spec.backend = lockstep::Backend::Mpi;
  spec.method = lockstep::InitMethod::Mpi;
  spec.rank = rank;
  spec.world_size = 2;
  spec.shared_memory = false;
  {
    Group over_mpi(spec);
    Group over_shm(file_spec(rank, dir + "/shm-in-mpi", true));
    torch::Tensor shared;  // from empty_shared, as DDP's buckets are
    measure(
        out_path, rank, [] { MPI_Barrier(MPI_COMM_WORLD); },
        [](float* data, int64_t count) {
          MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        },
        {[&](torch::Tensor& t) { over_mpi.all_reduce(t); }, [&](torch::Tensor& t) { over_shm.all_reduce(t); },
         [&](torch::Tensor&) { over_shm.all_reduce(shared); },
         [&](torch::Tensor&) {
           // ZeRO-2's case: each half needed by one rank (reduce_to_owners).
           const int64_t count = shared.numel();
           over_shm.communicator->reduce_to_owners(shared, {{count / 2, 0}, {count, 1}}, lockstep::ReduceOp::Sum, true);
         }},
        [&](int64_t count) { shared = over_shm.communicator->empty_shared({count}, at::kFloat).zero_(); });
  }
  MPI_Finalize();
  return 0;
}

int gloo_pair(const std::string& out_path, int rank, const std::string& dir) {
  fs::create_directories(dir + "/raw");
  auto store = std::make_shared<gloo::rendezvous::FileStore>(dir + "/raw");
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
  lockstep::gloo_compat::connect_full_mesh(*context, store, device);

  // The same interface as the raw context: only lockstep's layer differs.
  Group over_gloo(file_spec(rank, dir + "/gloo", false));
  Group over_shm(file_spec(rank, dir + "/shm", true));
  measure(
      out_path, rank,
      [&] {
        gloo::BarrierOptions opts(context);
        gloo::barrier(opts);
      },
      [&](float* data, int64_t count) {
        gloo::AllreduceOptions opts(context);
        opts.setOutput(data, count);
        opts.setAlgorithm(kGlooAlgorithm);
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        gloo::allreduce(opts);
      },
      {[&](torch::Tensor& t) { over_gloo.all_reduce(t); }, [&](torch::Tensor& t) { over_shm.all_reduce(t); },
       [&](torch::Tensor& t) {
         // Between two ranks: each sends the other only the half it needs.
         const int64_t count = t.numel();
         over_gloo.communicator->reduce_to_owners(t, {{count / 2, 0}, {count, 1}}, lockstep::ReduceOp::Sum, true);
       }});
  return 0;
}

// Per size: each variant's seconds and ratio, as measure() wrote them.
std::map<size_t, std::vector<double>> read_results(const std::string& path) {
  std::map<size_t, std::vector<double>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    size_t bytes;
    fields >> bytes;
    double value;
    while (fields >> value) rows[bytes].push_back(value);
  }
  return rows;
}

std::string size_name(size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MB" : std::to_string(bytes >> 10) + " KB";
}

// µs per call of each variant, their ratios to the raw engine, then GB/s of each.
std::string row(size_t bytes, const std::vector<double>& v) {
  std::string text;
  char cell[40];
  for (size_t i = 0; i < v.size(); i += 2) text += (std::snprintf(cell, sizeof(cell), " %.1f |", v[i] * 1e6), cell);
  for (size_t i = 3; i < v.size(); i += 2) text += (std::snprintf(cell, sizeof(cell), " %.2f |", v[i]), cell);
  for (size_t i = 0; i < v.size(); i += 2) {
    text += (std::snprintf(cell, sizeof(cell), " %.2f |", bytes / v[i] / 1e9), cell);
  }
  return text;
}

// A table with a column of µs per variant, of ratio per lockstep variant, of GB/s per variant.
void print_table(const std::string& title, const std::vector<std::string>& names,
                 const std::map<size_t, std::vector<double>>& rows) {
  std::string header = "| size |", rule = "|---:|";
  for (const auto& name : names) header += " " + name + " µs |", rule += "---:|";
  for (size_t i = 1; i < names.size(); ++i) header += " " + names[i] + " / " + names[0] + " |", rule += "---:|";
  for (const auto& name : names) header += " " + name + " GB/s |", rule += "---:|";
  std::printf("\n%s\n%s\n%s\n", title.c_str(), header.c_str(), rule.c_str());
  for (const auto& [bytes, v] : rows) std::printf("| %s |%s\n", size_name(bytes).c_str(), row(bytes, v).c_str());
}

// The element-wise sums shared memory reduces with, alone on one core: two L2-resident
// inputs of 64 Ki elements, median of 101 timings.
void print_kernel_speeds() {
  std::printf("\nElement-wise sums (reduce_kernels), 2 inputs of 64 Ki elements in L2, one core:\n");
  const size_t n = 64 << 10;
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const size_t bytes = n * c10::elementSize(dtype);
    std::vector<char> a(bytes, 0), b(bytes, 0), out(bytes);
    const void* inputs[2] = {a.data(), b.data()};
    const auto sum = lockstep::reduce_many_function(dtype, lockstep::ReduceOp::Sum);
    std::vector<double> rates;
    for (int round = 0; round < kRounds; ++round) {
      const auto start = Clock::now();
      for (int i = 0; i < 100; ++i) sum(out.data(), nullptr, inputs, 2, n);
      rates.push_back(100.0 * n / std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::printf("- %s: %.2f G elements/s\n", c10::toString(dtype), median(rates) / 1e9);
  }
}

int parent(const std::string& self) {
  char pattern[] = "/tmp/lockstep-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::map<std::string, std::string> root_ok = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  if (run_command({"mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", self, "mpi", dir + "/mpi.txt", dir},
                  root_ok) != 0) {
    return 1;
  }
  const pid_t second = fork();
  if (second == 0) _exit(run_command({self, "gloo", dir + "/gloo.txt", "1", dir}));
  const int first = run_command({self, "gloo", dir + "/gloo.txt", "0", dir});
  int status = 0;
  waitpid(second, &status, 0);
  if (first != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;

  const auto mpi = read_results(dir + "/mpi.txt");
  const auto gloo = read_results(dir + "/gloo.txt");
  print_table(
      "Under mpirun: raw MPI_Allreduce, lockstep over MPI (LOCKSTEP_SHM=0), lockstep over shared memory "
      "(an ordinary tensor, one from empty_shared, and that one reduced to the owners of its halves)",
      {"MPI", "lockstep MPI", "shm", "shm shared", "shm to owners"}, mpi);
  print_table(
      "Without MPI: raw gloo, lockstep over gloo (LOCKSTEP_SHM=0), lockstep over shared memory, and lockstep over "
      "gloo reduced to the owners of the tensor's halves",
      {"gloo", "lockstep gloo", "shm", "gloo to owners"}, gloo);
  print_kernel_speeds();
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "mpi" && argc == 4) return mpi_pair(argv[2], argv[3]);
  if (role == "gloo" && argc == 5) return gloo_pair(argv[2], std::atoi(argv[3]), argv[4]);
  return parent(fs::canonical("/proc/self/exe"));
}
