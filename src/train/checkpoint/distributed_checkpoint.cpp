#include "train/checkpoint/distributed_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/replicas.h"
#include "lockstep/ddp/synchronize.h"
#include "comm/tensors/encoding.h"
#include "lockstep/error.h"
#include "optim/state_files.h"
#include "train/checkpoint/checkpoint_layout.h"

namespace lockstep::train {
namespace {

// Room for rank 0's error message in the broadcast that tells everyone how loading went.
constexpr int64_t kMessageBytes = 2048;

// The generators a rank draws from: the CPU's, and that of the CUDA device it trains on.
// Called inside with_replica_generator, so that a replica's own CPU stream is the one seen.
std::vector<at::Generator> generators_in_use(torch::Device device) {
  std::vector<at::Generator> in_use = {at::detail::getDefaultCPUGenerator()};
  if (device.is_cuda()) in_use.push_back(at::globalContext().defaultGenerator(device));
  return in_use;
}

torch::Tensor generator_states(torch::Device device) {
  std::vector<torch::Tensor> states;
  with_replica_generator([&] {
    for (auto& generator : generators_in_use(device)) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      states.push_back(generator.get_state());
    }
  });
  return torch::cat(states);
}

// `row` holds the states end to end, as generator_states() wrote them; a generator it has
// no state for (a run saved on the CPU, resumed on a GPU) keeps its own.
void set_generator_states(torch::Device device, const torch::Tensor& row) {
  with_replica_generator([&] {
    int64_t offset = 0;
    for (auto& generator : generators_in_use(device)) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      const int64_t size = generator.get_state().numel();
      if (offset + size > row.numel()) return;
      generator.set_state(row.narrow(0, offset, size).clone());
      offset += size;
    }
  });
}

}  // namespace

std::string save_collectively(const CheckpointFolder& folder, const TrainedState& state,
                              const TrainingPosition& position, const std::string& model_name) {
  // Rows of one length on every rank, should ranks train on different kinds of device.
  torch::Tensor row = generator_states(state.device);
  torch::Tensor longest = torch::tensor({row.numel()});
  lockstep::all_reduce(longest, ReduceOp::Max, state.group);
  row = torch::constant_pad_nd(row, {0, longest.item<int64_t>() - row.numel()});
  const auto rng_states = torch::stack(lockstep::all_gather(row, state.group));
  const optim::StateFiles state_files(state.optimizer);
  // Every rank its own shard, at once; rank 0's file, which names them, only once all are on disk.
  if (state_files.sharded()) state_files.write_shard(folder.path(position.step), position.step);
  if (state.group.rank() != 0) return "";
  return folder.save(state.model, state.optimizer,
                     CheckpointState{position, model_name, rng_states, state.ddp.bucket_order()});
}

std::optional<TrainingPosition> resume_collectively(const CheckpointFolder& folder, const TrainedState& state) {
  // status (0 no checkpoint, 1 loaded, 2 failed: message follows), the position, the shape
  // of the random generator states (rows, length), the bucket order's length, and the
  // number of optimizer shards (0: the state is in rank 0's file), the global batch size
  // and the dataset size.
  auto header = torch::zeros({11}, torch::kInt64);
  auto message = torch::zeros({kMessageBytes}, torch::kUInt8);
  CheckpointState loaded;
  optim::ShardLayout layout;
  if (state.group.rank() == 0) {
    const std::string path = folder.latest();
    if (!path.empty()) {
      try {
        loaded = load_checkpoint_and_layout(path, state.model, state.optimizer, layout);
        const auto& p = loaded.position;
        const torch::Tensor& rng = loaded.rng_states;
        const bool per_rank = rng.defined() && rng.dim() == 2 && rng.size(0) == p.world_size;
        header = torch::tensor({int64_t{1}, p.epoch, p.batch, p.step, p.world_size, per_rank ? rng.size(0) : 0,
                                per_rank ? rng.size(1) : 0, static_cast<int64_t>(loaded.bucket_order.size()),
                                layout.world_size, p.global_batch_size, p.dataset_size});
      } catch (const Error& error) {
        header[0] = 2;
        const std::string text = error.what();
        std::memcpy(message.data_ptr(), text.data(), std::min<size_t>(text.size(), kMessageBytes - 1));
      }
    }
  }
  std::vector<torch::Tensor> both = {header, message};
  lockstep::broadcast(both, 0, state.group);
  header = both[0];
  message = both[1];
  const auto* h = header.data_ptr<int64_t>();
  if (h[0] == 0) return std::nullopt;
  if (h[0] == 2) {
    const std::string text(static_cast<const char*>(message.data_ptr()));
    throw DataError(state.group.rank() == 0 ? text : "rank 0 could not resume: " + text);
  }
  lockstep::synchronize(state.model, 0, state.group);
  if (const optim::StateFiles state_files(state.optimizer); state_files.sharded()) {
    state_files.resume_from_rank_zero(folder.path(h[3]), h[3], h[8], layout);
  } else {
    lockstep::synchronize(state.optimizer, 0, state.group);
  }
  if (h[7] > 0) {
    torch::Tensor order = state.group.rank() == 0 ? torch::tensor(loaded.bucket_order, torch::kInt64)
                                                  : torch::zeros({h[7]}, torch::kInt64);
    lockstep::broadcast(order, 0, state.group);
    state.ddp.load_bucket_order(detail::as_int64_vector(order));
  }
  const TrainingPosition position{h[1], h[2], h[3], h[4], h[9], h[10]};
  if (h[5] > 0 && position.world_size == state.group.size()) {
    // The same world: each rank continues with its own random streams, for a bit-exact resume.
    auto rows = state.group.rank() == 0 ? loaded.rng_states.contiguous() : torch::zeros({h[5], h[6]}, torch::kUInt8);
    lockstep::broadcast(rows, 0, state.group);
    set_generator_states(state.device, rows[state.group.rank()]);
  }
  return position;
}

}  // namespace lockstep::train
