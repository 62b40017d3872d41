#include "lockstep/ddp/distributed_data_parallel.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "comm/groups/process_group.h"
#include "ddp/gradient_reducer.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"
#include "lockstep/ddp/scripted_module.h"
#include "lockstep/ddp/synchronize.h"
#include "lockstep/optim/sharded_optimizer.h"

namespace lockstep {
namespace {

double gradient_scale(const DDPOptions& options) {
  if (options.gradient_scale()) return *options.gradient_scale();
  switch (options.reduce_op()) {
    case ReduceOp::Avg: return 1.0 / options.group().size();
    case ReduceOp::Sum: return 1.0;
    default: break;
  }
  throw ConfigError("lockstep::DDPOptions::reduce_op must be Avg or Sum, not " + to_string(options.reduce_op()));
}

constexpr double kBytesPerMegabyte = 1024.0 * 1024.0;

// libtorch runs every CUDA backward node of a process on one thread per device, and the
// callback that waits for the buckets can run there: replicas of run_replicas training on
// one GPU would wait for each other until the timeout. Refused on every replica, before any
// work, when the replicas' models share a GPU (processes may share one: each has its own
// backward threads).
void refuse_replicas_sharing_a_gpu(torch::nn::Module& module, const ProcessGroup& group) {
  if (!detail::current_replica()) return;
  int64_t mine = -1;
  for (const auto& p : module.parameters()) {
    if (p.is_cuda()) {
      mine = p.device().index();
      break;
    }
  }
  if (mine < 0) return;  // every replica's model is on the CPU, or the calls differ and say so
  const std::vector<at::Tensor> gpus = all_gather(at::full({1}, mine, at::kLong), group);
  for (size_t a = 0; a < gpus.size(); ++a) {
    for (size_t b = a + 1; b < gpus.size(); ++b) {
      if (gpus[a].item<int64_t>() != gpus[b].item<int64_t>()) continue;
      throw ConfigError("lockstep::DistributedDataParallel: replicas " + std::to_string(a) + " and " +
                        std::to_string(b) +
                        " of run_replicas both train on cuda:" + std::to_string(gpus[a].item<int64_t>()) +
                        ", where their backward passes would wait for each other (libtorch runs a process's CUDA "
                        "backward on one thread per device); give each replica a GPU of its own, or run the workers as "
                        "processes (lockstep run), which may share one");
    }
  }
}

// One device per model: buckets are flat tensors on one device, and libtorch runs each
// device's backward on a thread of its own, whose hooks would meet in the reducer. (PyTorch's
// Reducer keys buckets by device and locks instead; a model split over devices is pipeline
// parallelism, which lockstep does not do.) Local, so it is said before any collective.
void refuse_parameters_on_several_devices(torch::nn::Module& module) {
  std::optional<std::pair<std::string, at::Device>> first;
  for (const auto& entry : module.named_parameters()) {
    const at::Tensor& p = entry.value();
    if (!p.requires_grad()) continue;
    if (!first) {
      first.emplace(entry.key(), p.device());
    } else if (p.device() != first->second) {
      throw ConfigError("lockstep::DistributedDataParallel needs every trained parameter on one device, but '" +
                        first->first + "' is on " + first->second.str() + " and '" + entry.key() + "' on " +
                        p.device().str() + "; move the model with model->to(device)");
    }
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(const torch::jit::Module& module, DDPOptions options)
    : DistributedDataParallel(ScriptedModule(module).ptr(), std::move(options)) {}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, DDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  if (!is_initialized()) throw Error("lockstep::DistributedDataParallel: call lockstep::init() first");
  // A handle that stays this group after a later init() (the default one would follow it).
  options_.group(ProcessGroup(detail::state_of(options_.group()).shared_from_this()));
  refuse_parameters_on_several_devices(*module_);
  refuse_replicas_sharing_a_gpu(*module_, options_.group());
  // Also fails on every rank if the models differ.
  synchronize(*module_, options_.root(), options_.group());
  const double scale = gradient_scale(options_);
  // Nothing to reduce: no hooks, no cost. A hook of the user's still runs (it may do more
  // than sum, and bench/gpu_train measures the reducer's cost with one).
  if (options_.group().size() == 1 && scale == 1.0 && !options_.comm_hook()) return;

  std::vector<at::Tensor> parameters;
  std::vector<std::string> names;
  for (const auto& entry : module_->named_parameters()) {
    names.push_back(entry.key());
    parameters.push_back(entry.value());
  }
  GradientReducer::Options reducer;
  reducer.first_bucket_bytes = static_cast<int64_t>(options_.first_bucket_cap_mb() * kBytesPerMegabyte);
  reducer.bucket_bytes = static_cast<int64_t>(options_.bucket_cap_mb() * kBytesPerMegabyte);
  reducer.scale = scale;
  reducer.find_unused_parameters = options_.find_unused_parameters();
  reducer.gradient_as_bucket_view = options_.gradient_as_bucket_view();
  reducer.root = options_.root();
  reducer.group = options_.group();
  reducer.comm_hook = options_.comm_hook() ? options_.comm_hook() : allreduce_hook();
  if (options_.broadcast_buffers()) reducer.after_backward = [this] { broadcast_buffers(); };
  reducer_ = std::make_unique<GradientReducer>(std::move(parameters), std::move(names), std::move(reducer));
}

DistributedDataParallel::~DistributedDataParallel() = default;

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp) {
  if (ddp_.reducer_) ddp_.reducer_->set_accumulating(true);
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (ddp_.reducer_) ddp_.reducer_->set_accumulating(false);
}

void DistributedDataParallel::broadcast_buffers() {
  std::vector<at::Tensor> buffers = module_->buffers();
  if (!buffers.empty()) broadcast(buffers, options_.root(), options_.group());
}

std::vector<std::vector<size_t>> DistributedDataParallel::buckets() const {
  return reducer_ ? reducer_->buckets() : std::vector<std::vector<size_t>>{};
}

double DistributedDataParallel::last_gradient_wait_seconds() const {
  return reducer_ ? reducer_->last_wait_seconds() : 0;
}

std::vector<int64_t> DistributedDataParallel::bucket_order() const {
  return reducer_ ? reducer_->learned_order() : std::vector<int64_t>{};
}

void DistributedDataParallel::shard_gradients(const OptimizerSharding& sharding) {
  if (sharding.group().ranks() != options_.group().ranks()) {
    throw ConfigError(
        "lockstep::DistributedDataParallel::shard_gradients: the optimizer is sharded over another group "
        "than DDP's; make the ShardedOptimizer with DDP's group");
  }
  if (sharding.mirrored()) {
    throw ConfigError(
        "lockstep::DistributedDataParallel::shard_gradients: not under live recovery, where each partition is "
        "kept on two ranks; shard the optimizer state only (ZeRO-1)");
  }
  if (!reducer_) return;  // a world of one keeps every gradient anyway
  const auto& sharded = sharding.parameters();
  std::vector<int> owners;
  for (const auto& p : module_->parameters()) {
    // A parameter the optimizer does not step is kept everywhere, as without sharding.
    auto found = std::find_if(sharded.begin(), sharded.end(), [&](const at::Tensor& s) { return s.is_same(p); });
    owners.push_back(found == sharded.end() ? kEveryRank : sharding.owners()[found - sharded.begin()]);
  }
  reducer_->shard_gradients(std::move(owners));
}

int64_t DistributedDataParallel::bucket_bytes() const { return reducer_ ? reducer_->bucket_bytes() : 0; }

void DistributedDataParallel::load_bucket_order(const std::vector<int64_t>& order) {
  if (reducer_ && !order.empty()) reducer_->load_learned_order(order);
}

}  // namespace lockstep
