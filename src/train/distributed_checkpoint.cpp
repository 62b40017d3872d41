#include "train/distributed_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "lockstep/comm/collectives.h"
#include "lockstep/comm/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/ddp/synchronize.h"

namespace lockstep::train {
namespace {

// Room for rank 0's error message in the broadcast that tells everyone how loading went.
constexpr int64_t kMessageBytes = 2048;

torch::Tensor generator_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

}  // namespace

std::string save_collectively(const CheckpointFolder& folder, const torch::nn::Module& model,
                              const torch::optim::Optimizer& optimizer, const TrainingPosition& position,
                              const std::string& model_name) {
  const auto states = torch::stack(lockstep::all_gather(generator_state()));
  if (lockstep::rank() != 0) return "";
  return folder.save(model, optimizer, CheckpointState{position, model_name, states});
}

std::optional<TrainingPosition> resume_collectively(const CheckpointFolder& folder, torch::nn::Module& model,
                                                    torch::optim::Optimizer& optimizer) {
  // status (0 no checkpoint, 1 loaded, 2 failed: message follows), the position, and
  // whether it holds one random generator state per rank.
  auto header = torch::zeros({6}, torch::kInt64);
  auto message = torch::zeros({kMessageBytes}, torch::kUInt8);
  torch::Tensor rng_states;
  if (lockstep::rank() == 0) {
    const std::string path = folder.latest();
    if (!path.empty()) {
      try {
        const CheckpointState state = load_checkpoint(path, model, optimizer);
        const auto& p = state.position;
        rng_states = state.rng_states;
        const bool per_rank = rng_states.defined() && rng_states.dim() == 2 && rng_states.size(0) == p.world_size;
        header = torch::tensor({int64_t{1}, p.epoch, p.batch, p.step, p.world_size, int64_t{per_rank}});
      } catch (const Error& error) {
        header[0] = 2;
        const std::string text = error.what();
        std::memcpy(message.data_ptr(), text.data(), std::min<size_t>(text.size(), kMessageBytes - 1));
      }
    }
  }
  std::vector<torch::Tensor> both = {header, message};
  lockstep::broadcast(both);
  header = both[0];
  message = both[1];
  const auto* h = header.data_ptr<int64_t>();
  if (h[0] == 0) return std::nullopt;
  if (h[0] == 2) {
    const std::string text(static_cast<const char*>(message.data_ptr()));
    throw DataError(lockstep::rank() == 0 ? text : "rank 0 could not resume: " + text);
  }
  lockstep::synchronize(model);
  lockstep::synchronize(optimizer);
  const TrainingPosition position{h[1], h[2], h[3], h[4]};
  if (h[5] == 1 && position.world_size == lockstep::world_size()) {
    // The same world: each rank continues with its own random stream, for a bit-exact resume.
    auto states = lockstep::rank() == 0 ? rng_states.contiguous()
                                        : torch::zeros({position.world_size, generator_state().numel()}, torch::kUInt8);
    lockstep::broadcast(states);
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // shares the default's state
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(states[lockstep::rank()].clone());
  }
  return position;
}

}  // namespace lockstep::train
