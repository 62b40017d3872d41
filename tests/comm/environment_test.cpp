// How init() reads torchrun, OpenMPI, Slurm and lockstep variables (no processes needed).
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "comm/transports/device_call.h"
#include "comm/transports/device_transports.h"
#include "comm/world/environment.h"
#include "support/env_lookup.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"

namespace lockstep {
namespace {

using testing::env_of;

std::string error_of(const InitOptions& options, std::map<std::string, std::string> env) {
  try {
    discover_world(options, env_of(std::move(env)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Environment, NothingSetMeansAWorldOfOne) {
  const auto spec = discover_world(InitOptions(), env_of({}));
  EXPECT_EQ(spec.rank, 0);
  EXPECT_EQ(spec.world_size, 1);
  EXPECT_EQ(spec.backend, Backend::Gloo);
  EXPECT_EQ(spec.method, InitMethod::Auto);
  EXPECT_EQ(spec.timeout, std::chrono::seconds(300));
  EXPECT_FALSE(spec.debug);
}

TEST(Environment, TorchrunVariables) {
  const auto spec = discover_world(InitOptions(), env_of({{"RANK", "3"},
                                                          {"WORLD_SIZE", "4"},
                                                          {"LOCAL_RANK", "1"},
                                                          {"LOCAL_WORLD_SIZE", "2"},
                                                          {"MASTER_ADDR", "node7"},
                                                          {"MASTER_PORT", "1234"},
                                                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  EXPECT_EQ(spec.rank, 3);
  EXPECT_EQ(spec.world_size, 4);
  EXPECT_EQ(spec.local_rank, 1);
  EXPECT_EQ(spec.local_world_size, 2);
  EXPECT_EQ(spec.method, InitMethod::Tcp);
  EXPECT_EQ(spec.master_addr, "node7");
  EXPECT_EQ(spec.master_port, 1234);
  EXPECT_TRUE(spec.store_hosted_by_launcher);
}

TEST(Environment, OpenMpiVariablesPickTheMpiBackend) {
  const auto spec = discover_world(InitOptions(), env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                                          {"OMPI_COMM_WORLD_SIZE", "2"},
                                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(spec.rank, 1);
  EXPECT_EQ(spec.world_size, 2);
  EXPECT_EQ(spec.backend, Backend::Mpi);
  EXPECT_EQ(spec.method, InitMethod::Mpi);
  EXPECT_EQ(spec.local_rank, 1);
}

TEST(Environment, SlurmVariablesWithAFileStore) {
  const auto spec = discover_world(InitOptions(), env_of({{"SLURM_PROCID", "5"},
                                                          {"SLURM_NTASKS", "8"},
                                                          {"SLURM_LOCALID", "1"},
                                                          {"LOCKSTEP_INIT_FILE", "/shared/run"}}));
  EXPECT_EQ(spec.rank, 5);
  EXPECT_EQ(spec.world_size, 8);
  EXPECT_EQ(spec.method, InitMethod::File);
  EXPECT_EQ(spec.file_path, "/shared/run");
  EXPECT_FALSE(spec.local_rank.has_value());  // no local size: found from host names
}

TEST(Environment, MpirunInsideASlurmAllocationIsNotAConflict) {
  const auto spec = discover_world(InitOptions(), env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                                          {"OMPI_COMM_WORLD_SIZE", "2"},
                                                          {"SLURM_PROCID", "0"},
                                                          {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(spec.rank, 1);
  EXPECT_EQ(spec.world_size, 2);
}

TEST(Environment, OptionsOverrideTheEnvironment) {
  const auto spec = discover_world(InitOptions()
                                       .rank(1)
                                       .world_size(2)
                                       .backend(Backend::Gloo)
                                       .method(InitMethod::File)
                                       .file_path("/tmp/x")
                                       .timeout(std::chrono::seconds(7))
                                       .debug(true),
                                   env_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCKSTEP_TIMEOUT", "9"}}));
  EXPECT_EQ(spec.rank, 1);
  EXPECT_EQ(spec.world_size, 2);
  EXPECT_EQ(spec.method, InitMethod::File);
  EXPECT_EQ(spec.timeout, std::chrono::seconds(7));
  EXPECT_TRUE(spec.debug);
}

TEST(Environment, LockstepVariables) {
  const auto spec = discover_world(InitOptions(), env_of({{"LOCKSTEP_RANK", "0"},
                                                          {"LOCKSTEP_WORLD_SIZE", "2"},
                                                          {"RANK", "0"},
                                                          {"MASTER_ADDR", "h"},
                                                          {"LOCKSTEP_TIMEOUT", "2.5"},
                                                          {"LOCKSTEP_DEBUG", "1"},
                                                          {"LOCKSTEP_USE_AGENT_STORE", "1"}}));
  EXPECT_EQ(spec.timeout, std::chrono::milliseconds(2500));
  EXPECT_TRUE(spec.debug);
  EXPECT_TRUE(spec.store_hosted_by_launcher);
}

// What the launcher tells a restarted attempt, read once here for the timeline's mark.
TEST(Environment, TheLaunchersRestartCountAndReason) {
  EXPECT_EQ(discover_world(InitOptions(), env_of({})).restart_reason, "");
  const auto spec = discover_world(
      InitOptions(),
      env_of({{"LOCKSTEP_RESTART_COUNT", "2"}, {"LOCKSTEP_RESTART_REASON", "rank 1 (pid 7) exited with status 3"}}));
  EXPECT_EQ(spec.restart_count, 2);
  EXPECT_EQ(spec.restart_reason, "rank 1 (pid 7) exited with status 3");
}

TEST(Environment, ErrorsNameTheVariableToFix) {
  EXPECT_EQ(error_of(InitOptions(), {{"RANK", "1"}}),
            "lockstep: RANK is set but the world size is not; set both (e.g. RANK and WORLD_SIZE)");
  EXPECT_EQ(error_of(InitOptions().rank(4), {{"WORLD_SIZE", "4"}}),
            "lockstep: InitOptions::rank=4 is out of range for WORLD_SIZE=4 (ranks are 0..3)");
  EXPECT_EQ(error_of(InitOptions(), {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCKSTEP_WORLD_SIZE", "3"}}),
            "lockstep: conflicting settings: LOCKSTEP_WORLD_SIZE=3 but WORLD_SIZE=2; unset the one "
            "that does not belong to this launch");
  EXPECT_NE(
      error_of(
          InitOptions(),
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})
          .find("LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2 do not fit"),
      std::string::npos);
  EXPECT_NE(error_of(InitOptions().backend(Backend::Mpi).method(InitMethod::Tcp), {})
                .find("the mpi backend finds its ranks through mpirun"),
            std::string::npos);
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_DEBUG", "maybe"}}),
            "lockstep: LOCKSTEP_DEBUG='maybe' must be detail (or 1) or off (or 0)");
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_INIT_METHOD", "carrier-pigeon"}}),
            "lockstep: LOCKSTEP_INIT_METHOD='carrier-pigeon' must be tcp, file, mpi or auto");
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_BACKEND", "ucc"}}),
            "lockstep: LOCKSTEP_BACKEND='ucc' must be auto, gloo or mpi (or nccl, which means "
            "LOCKSTEP_DEVICE_BACKEND=nccl)");
}

// The backend nccl, which came before the device backend, keeps working: it means Auto's
// host backend and the device backend nccl.
TEST(Environment, TheBackendNcclMeansTheDeviceBackendNccl) {
  if (!built_with_nccl()) GTEST_SKIP() << "this build has no NCCL; the next test covers it";
  for (const auto& env : {std::map<std::string, std::string>{{"LOCKSTEP_BACKEND", "nccl"}},
                          std::map<std::string, std::string>{{"LOCKSTEP_DEVICE_BACKEND", "nccl"}},
                          std::map<std::string, std::string>{}}) {
    const auto spec = discover_world(env.empty() ? InitOptions().backend(Backend::Nccl) : InitOptions(), env_of(env));
    EXPECT_EQ(spec.backend, Backend::Gloo);
    EXPECT_EQ(spec.device_backend, DeviceBackend::Nccl);
  }
  const auto mpirun = discover_world(InitOptions().backend(Backend::Nccl),
                                     env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
  EXPECT_EQ(mpirun.backend, Backend::Mpi);
  EXPECT_EQ(mpirun.device_backend, DeviceBackend::Nccl);
  EXPECT_EQ(mpirun.method, InitMethod::Mpi);
}

TEST(Environment, TheDeviceBackendNcclWithoutNcclSaysWhy) {
  if (built_with_nccl()) GTEST_SKIP() << "this build has NCCL; the previous test covers it";
  const std::string why =
      built_with_cuda() ? "found no NCCL beside its libtorch" : "was built against a libtorch without CUDA";
  const std::string expected =
      "lockstep: the device backend nccl needs lockstep built against a libtorch with CUDA and "
      "NCCL (docs/GPU.md), but this one " +
      why + "; the device backend staged moves CUDA tensors through host memory";
  EXPECT_EQ(error_of(InitOptions().backend(Backend::Nccl), {}), expected);
  EXPECT_EQ(error_of(InitOptions().device_backend(DeviceBackend::Nccl), {}), expected);
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_BACKEND", "nccl"}}), expected);
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_DEVICE_BACKEND", "nccl"}}), expected);
}

// Each setting has one meaning: choosing the host backend leaves the device backend alone.
TEST(Environment, TheHostAndDeviceBackendsAreSettledApart) {
  for (const Backend host : {Backend::Gloo, Backend::Auto}) {
    const auto spec = discover_world(InitOptions().backend(host), env_of({}));
    EXPECT_EQ(spec.backend, Backend::Gloo);
    EXPECT_EQ(spec.device_backend, DeviceBackend::Auto);
  }
  const auto staged =
      discover_world(InitOptions(), env_of({{"LOCKSTEP_BACKEND", "gloo"}, {"LOCKSTEP_DEVICE_BACKEND", "staged"}}));
  EXPECT_EQ(staged.backend, Backend::Gloo);
  EXPECT_EQ(staged.device_backend, DeviceBackend::Staged);
  // Options win over the environment, as everywhere.
  EXPECT_EQ(
      discover_world(InitOptions().device_backend(DeviceBackend::Staged), env_of({{"LOCKSTEP_DEVICE_BACKEND", "nccl"}}))
          .device_backend,
      DeviceBackend::Staged);
  EXPECT_EQ(error_of(InitOptions(), {{"LOCKSTEP_DEVICE_BACKEND", "host"}}),
            "lockstep: LOCKSTEP_DEVICE_BACKEND='host' must be auto, staged or nccl");
  EXPECT_EQ(
      error_of(InitOptions().backend(Backend::Nccl).device_backend(DeviceBackend::Staged), {}),
      "lockstep: the backend nccl (which means the device backend nccl) conflicts with the device backend staged; "
      "choose one");
}

// LOCKSTEP_DEBUG=detail, as TORCH_DISTRIBUTED_DEBUG=DETAIL, compares every call; 1 is kept.
TEST(Environment, DebugDetailComparesEveryCall) {
  for (const std::string on : {"detail", "DETAIL", "1"}) {
    EXPECT_TRUE(discover_world(InitOptions(), env_of({{"LOCKSTEP_DEBUG", on}})).debug) << on;
  }
  for (const std::string off : {"off", "0", ""}) {
    EXPECT_FALSE(discover_world(InitOptions(), env_of({{"LOCKSTEP_DEBUG", off}})).debug) << off;
  }
  EXPECT_FALSE(discover_world(InitOptions(), env_of({})).debug);
}

// Item 5 of the GPU review: without InitOptions::device, init makes this GPU current, so
// that user code allocating `torch::kCUDA` lands on a GPU of the rank's own, not all on GPU 0.
TEST(Environment, EachLocalRankGetsAGpuOfItsOwnWhenTheUserChoseNone) {
  EXPECT_EQ(gpu_of_local_rank(0, 0), std::nullopt);
  EXPECT_EQ(gpu_of_local_rank(3, 0), std::nullopt);
  EXPECT_EQ(gpu_of_local_rank(0, 8), 0);
  EXPECT_EQ(gpu_of_local_rank(5, 8), 5);
  EXPECT_EQ(gpu_of_local_rank(7, 8), 7);
  // More ranks than GPUs share them round robin (the group then stages, docs/GPU.md).
  EXPECT_EQ(gpu_of_local_rank(1, 1), 0);
  EXPECT_EQ(gpu_of_local_rank(5, 4), 1);
  if (!built_with_cuda()) EXPECT_EQ(visible_cuda_devices(), 0);
}

// Refused before meeting anyone: the rank waiting for a second one would take the timeout.
TEST(Environment, ADeviceInACpuBuildIsRefusedBeforeTheRendezvous) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has CUDA; tests/gpu covers devices";
  const auto started = std::chrono::steady_clock::now();
  std::string message = "no error";
  try {
    init(InitOptions()
             .device(1)
             .rank(0)
             .world_size(2)
             .method(InitMethod::File)
             .file_path("/tmp/lockstep-never-met")
             .timeout(std::chrono::seconds(20)));
  } catch (const ConfigError& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "lockstep::init: InitOptions::device(1) needs a GPU, but this lockstep was built against a "
            "libtorch without CUDA (docs/GPU.md)");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_FALSE(is_initialized());
}

}  // namespace
}  // namespace lockstep
