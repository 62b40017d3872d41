// lockstep's all_reduce next to the raw engines it drives, on the same buffers, in one run
// of 2 local processes:
//
//   bench/allreduce            (starts itself under mpirun -n 2)
//
// For every message size it prints the median time per call and the algorithm bandwidth
// (bytes / time) of raw MPI_Allreduce, lockstep over MPI, raw gloo and lockstep over gloo,
// and lockstep's overhead over each engine.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
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


// Re-runs this program as 2 ranks under mpirun, unless it is one of them already.
void become_two_ranks(char** argv) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) return;
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  std::vector<const char*> args = {"mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", argv[0]};
  args.push_back(nullptr);
  execvp("mpirun", const_cast<char**>(args.data()));
  std::perror("cannot start mpirun");
  std::exit(1);
}

std::string shared_text(const std::string& mine_if_root) {
  char text[256] = {};
  std::snprintf(text, sizeof(text), "%s", mine_if_root.c_str());
  MPI_Bcast(text, sizeof(text), MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

std::shared_ptr<gloo::Context> raw_gloo_context(int rank, const std::string& dir) {
  std::filesystem::create_directories(dir);
  gloo::rendezvous::FileStore store(dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  auto device = gloo::transport::tcp::CreateDevice("127.0.0.1");
  context->connectFullMesh(store, device);
  return context;
}

// The same rendezvous and interface as the raw gloo context: only lockstep's layer differs.
// lockstep asks gloo for this algorithm; the raw baseline uses the same.
constexpr auto kLockstepAlgorithm = gloo::AllreduceOptions::Algorithm::BCUBE;

void raw_gloo_all_reduce(const std::shared_ptr<gloo::Context>& context, float* data, int64_t count,
                         gloo::AllreduceOptions::Algorithm algorithm) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(data, count);
  opts.setAlgorithm(algorithm);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

std::unique_ptr<lockstep::Communicator> lockstep_gloo(int rank, const std::string& dir) {
  lockstep::WorldSpec spec;
  spec.backend = lockstep::Backend::Gloo;
  spec.method = lockstep::InitMethod::File;
  spec.rank = rank;
  spec.world_size = 2;
  spec.file_path = dir;
  spec.socket_ifname = "lo";
  spec.timeout = std::chrono::seconds(60);
  return lockstep::join_group(spec).communicator;
}

// Median seconds per call. The variants take turns call by call, so that machine noise
// hits them alike, and the median ignores the stragglers a shared machine produces.
std::vector<double> time_side_by_side(const std::vector<Variant>& variants, int calls) {
  std::vector<std::vector<double>> samples(variants.size());
  for (const auto& variant : variants) variant();  // warm-up
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < calls; ++i) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const auto start = Clock::now();
      variants[v]();
      samples[v].push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  std::vector<double> medians;
  for (auto& s : samples) {
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

std::string size_name(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MB";
  return std::to_string(bytes >> 10) + " KB";
}

}  // namespace

int main(int, char** argv) {
  become_two_ranks(argv);
  at::set_num_threads(1);
  lockstep::init(lockstep::InitOptions().backend(lockstep::Backend::Mpi));
  const int rank = lockstep::rank();

  char dir_pattern[] = "/tmp/lockstep-bench-XXXXXX";
  const std::string dir = shared_text(rank == 0 ? mkdtemp(dir_pattern) : "");
  auto gloo_context = raw_gloo_context(rank, dir + "/raw");
  auto gloo_group = lockstep_gloo(rank, dir + "/lockstep");

  if (rank == 0) {
    std::printf("| size | MPI µs | lockstep MPI µs | overhead | gloo µs | lockstep gloo µs | overhead "
                "| MPI GB/s | lockstep MPI GB/s | gloo GB/s | lockstep gloo GB/s | gloo ring µs |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (size_t bytes = 4 << 10; bytes <= (64u << 20); bytes *= 4) {
    const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
    torch::Tensor buffer = torch::zeros({count});
    float* data = buffer.data_ptr<float>();
    const std::vector<Variant> variants = {
        [&] { MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
        [&] { lockstep::all_reduce(buffer); },
        [&] { raw_gloo_all_reduce(gloo_context, data, count, kLockstepAlgorithm); },
        [&] { gloo_group->all_reduce({buffer}, lockstep::ReduceOp::Sum, /*blocking=*/true); },
        [&] { raw_gloo_all_reduce(gloo_context, data, count, gloo::AllreduceOptions::Algorithm::RING); },
    };
    const int calls = static_cast<int>(std::clamp<size_t>((256u << 20) / bytes, 15, 1000));
    const auto t = time_side_by_side(variants, calls);
    if (rank != 0) continue;
    auto us = [](double s) { return s * 1e6; };
    auto gbps = [&](double s) { return bytes / s / 1e9; };
    auto overhead = [&](double raw, double ours) {
      char text[64];
      std::snprintf(text, sizeof(text), "%+.1f µs (%+.1f%%)", us(ours - raw), 100 * (ours - raw) / raw);
      return std::string(text);
    };
    std::printf("| %s | %.1f | %.1f | %s | %.1f | %.1f | %s | %.2f | %.2f | %.2f | %.2f | %.1f |\n",
                size_name(bytes).c_str(), us(t[0]), us(t[1]), overhead(t[0], t[1]).c_str(), us(t[2]),
                us(t[3]), overhead(t[2], t[3]).c_str(), gbps(t[0]), gbps(t[1]), gbps(t[2]), gbps(t[3]),
                us(t[4]));
    std::fflush(stdout);
  }
  gloo_group.reset();
  lockstep::shutdown();
  if (rank == 0) std::filesystem::remove_all(dir);
  return 0;
}
