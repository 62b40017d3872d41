// A checkpoint of ResNet-50 with Adam's state (about 300 MB) written to the local disk and
// to a real S3 (Ceph's RADOS Gateway, started on loopback by the tests' support), side by
// side, and read back from each:
//
//   bench/s3_checkpoint [REPEATS]
//
// prints the median seconds of each. The gateway keeps its objects in memory (memstore), so
// the S3 rows measure lockstep's signing, HTTP and multipart upload over loopback, not a disk.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"
#include "median.h"
#include "support/s3_gateway.h"
#include "support/tool_process.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace train = lockstep::train;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  lockstep::testing::S3Gateway gateway;
  if (!gateway.available() || !gateway.make_bucket("checkpoints")) {
    std::printf("no S3 gateway: %s\n", gateway.why_not().c_str());
    return 1;
  }
  setenv("AWS_ACCESS_KEY_ID", gateway.access_key().c_str(), 1);
  setenv("AWS_SECRET_ACCESS_KEY", gateway.secret_key().c_str(), 1);
  setenv("AWS_ENDPOINT_URL", gateway.endpoint().c_str(), 1);

  auto model = train::make_model("resnet50", train::ModelOptions().in_channels(3).num_classes(1000).image_size(224));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  // One step, so that Adam holds its two moments for every parameter.
  model->train();
  torch::nn::functional::cross_entropy(model->forward(torch::randn({2, 3, 224, 224})), torch::tensor({1, 2}))
      .backward();
  optimizer.step();
  int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();

  lockstep::testing::TemporaryDirectory local;
  const std::vector<std::pair<std::string, std::string>> folders{{"local disk", local.path() + "/checkpoints"},
                                                                 {"S3 gateway over loopback", "s3://checkpoints/run"}};
  std::vector<std::vector<double>> saves(folders.size()), loads(folders.size());
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (size_t f = 0; f < folders.size(); ++f) {
      const train::CheckpointFolder folder(folders[f].second, 1);
      train::CheckpointState state;
      state.position.step = repeat + 1;
      state.model_name = "resnet50";
      auto start = Clock::now();
      const std::string written = folder.save(*model, optimizer, state);
      saves[f].push_back(seconds_since(start));
      start = Clock::now();
      train::load_checkpoint(written, *model, optimizer);
      loads[f].push_back(seconds_since(start));
    }
  }
  const auto bytes = std::filesystem::file_size(train::CheckpointFolder(folders[0].second, 1).latest());
  std::printf("ResNet-50 (%lld parameters) with Adam's state: a checkpoint of %.0f MB, median of %d\n\n",
              static_cast<long long>(parameters), bytes / 1e6, repeats);
  std::printf("| where | save (s) | load (s) |\n|---|---:|---:|\n");
  for (size_t f = 0; f < folders.size(); ++f) {
    std::printf("| %s | %.2f | %.2f |\n", folders[f].first.c_str(), lockstep::bench::median(saves[f]),
                lockstep::bench::median(loads[f]));
  }
  return 0;
}
