#include "lockstep/train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include <torch/serialize.h>

#include "comm/tensors/encoding.h"
#include "lockstep/error.h"
#include "optim/durable_file.h"
#include "optim/optimizer_shards.h"
#include "optim/state_files.h"
#include "train/checkpoint/checkpoint_layout.h"

namespace lockstep::train {
namespace {

namespace fs = std::filesystem;

// Written into every checkpoint, so that another file is recognised as not being one.
constexpr int64_t kFormat = 1;

// "step-0000000100.pt", and not its shards "step-0000000100.optimizer-1-of-2.pt".
bool is_checkpoint_name(const std::string& name) {
  const std::string prefix = "step-", suffix = ".pt";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string step = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(step.begin(), step.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A checkpoint and the optimizer shards written beside it.
void remove_with_shards(const std::string& checkpoint) {
  const fs::path path(checkpoint);
  const std::string shard_prefix = path.stem().string() + ".optimizer-";
  optim::remove_file(checkpoint);
  for (const auto& name : optim::names_in_folder(path.parent_path().string())) {
    if (name.rfind(shard_prefix, 0) == 0) optim::remove_file((path.parent_path() / name).string());
  }
}

std::string checkpoint_name(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%010lld.pt", static_cast<long long>(step));
  return name;
}

// The model's tensors by qualified name: parameters, then buffers ("buffer:" prefixed,
// since a parameter and a buffer may not share a name but readers should not guess).
std::map<std::string, torch::Tensor> model_tensors(const torch::nn::Module& model) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : model.named_parameters()) tensors["param:" + item.key()] = item.value();
  for (const auto& item : model.named_buffers()) tensors["buffer:" + item.key()] = item.value();
  return tensors;
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key, const std::string& path) {
  torch::Tensor value;
  if (!archive.try_read(key, value)) throw DataError(path + ": not a lockstep checkpoint (no '" + key + "')");
  return value.item<int64_t>();
}

std::string shape_of(const torch::Tensor& tensor) { return c10::str(tensor.sizes()); }

// "param:fc.weight" -> "parameter 'fc.weight'"
std::string describe_key(const std::string& key) {
  const auto colon = key.find(':');
  return (key.compare(0, colon, "param") == 0 ? "parameter '" : "buffer '") + key.substr(colon + 1) + "'";
}

torch::serialize::InputArchive open_checkpoint(const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    // Onto the CPU, whatever device saved it: the model's tensors are copied to theirs, and
    // the optimizer's state is moved to its parameters' (a GPU run resumes on a CPU machine
    // and the other way round).
    if (!optim::load_archive(archive, path)) throw DataError(path + ": no such checkpoint");
  } catch (const c10::Error& e) {
    throw DataError(path + ": not a readable checkpoint (corrupt or truncated?): " + e.what_without_backtrace());
  }
  if (read_int(archive, "format", path) != kFormat)
    throw DataError(path + ": checkpoint format is not " + std::to_string(kFormat));
  return archive;
}

std::map<std::string, torch::Tensor> saved_model_tensors(torch::serialize::InputArchive& archive,
                                                         const std::string& path) {
  torch::serialize::InputArchive model_archive;
  if (!archive.try_read("model", model_archive)) throw DataError(path + ": not a lockstep checkpoint (no model)");
  std::map<std::string, torch::Tensor> saved;
  for (const auto& key : model_archive.keys()) model_archive.read(key, saved[key]);
  return saved;
}

// Every tensor of `mine` has its like in `saved` and the other way round; DataError naming
// the first that differs.
void check_same_tensors(const std::map<std::string, torch::Tensor>& saved,
                        const std::map<std::string, torch::Tensor>& mine, const std::string& source) {
  const std::string another = "; is it a checkpoint of another model?";
  for (const auto& [key, tensor] : mine) {
    const auto found = saved.find(key);
    if (found == saved.end()) throw DataError(source + " has no " + describe_key(key) + another);
    if (!found->second.sizes().equals(tensor.sizes())) {
      throw DataError(source + ": " + describe_key(key) + " has shape " + shape_of(found->second) + " there but " +
                      shape_of(tensor) + " in this model" + another);
    }
  }
  for (const auto& [key, tensor] : saved) {
    if (mine.count(key) == 0) throw DataError(source + " has a " + describe_key(key) + " this model lacks" + another);
  }
}

void copy_tensors(const std::map<std::string, torch::Tensor>& saved, std::map<std::string, torch::Tensor>& mine) {
  torch::NoGradGuard no_grad;
  for (auto& [key, tensor] : mine) tensor.copy_(saved.at(key));
}

}  // namespace

CheckpointFolder::CheckpointFolder(std::string folder, int keep)
    : folder_(std::move(folder)), keep_(std::max(keep, 1)) {}

std::string CheckpointFolder::save(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                                   const CheckpointState& state) const {
  optim::make_folder(folder_);
  torch::serialize::OutputArchive archive;
  archive.write("format", torch::tensor(kFormat));
  archive.write("epoch", torch::tensor(state.position.epoch));
  archive.write("batch", torch::tensor(state.position.batch));
  archive.write("step", torch::tensor(state.position.step));
  archive.write("world_size", torch::tensor(state.position.world_size));
  archive.write("global_batch_size", torch::tensor(state.position.global_batch_size));
  archive.write("dataset_size", torch::tensor(state.position.dataset_size));
  archive.write("model_name", detail::text_tensor(state.model_name));
  if (state.rng_states.defined()) archive.write("rng_states", state.rng_states);
  if (!state.bucket_order.empty()) archive.write("bucket_order", torch::tensor(state.bucket_order, torch::kInt64));
  torch::serialize::OutputArchive model_archive;
  for (const auto& [key, tensor] : model_tensors(model)) model_archive.write(key, tensor.detach());
  archive.write("model", model_archive);
  // Reading the state changes nothing; the optimizer's interfaces just are not const.
  const optim::StateFiles state_files(const_cast<torch::optim::Optimizer&>(optimizer));
  if (!state_files.holds_all_state()) {
    // Each rank has written its own shard (save_collectively): this file says where they are.
    state_files.layout().write(archive);
  } else {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }

  const std::string final_path = path(state.position.step);
  optim::save_archive_atomically(archive, final_path);
  optim::sync_folder(folder_);  // makes the rename itself durable

  const auto all = list();
  for (size_t i = 0; i + static_cast<size_t>(keep_) < all.size(); ++i) remove_with_shards(all[i]);
  return final_path;
}

std::vector<std::string> CheckpointFolder::list() const {
  std::vector<std::string> found;
  for (const auto& name : optim::names_in_folder(folder_)) {
    // Only finished files: a ".tmp" left by a crash is never a checkpoint, nor is a shard.
    if (is_checkpoint_name(name)) found.push_back((fs::path(folder_) / name).string());
  }
  std::sort(found.begin(), found.end());  // zero-padded steps sort in step order
  return found;
}

std::string CheckpointFolder::path(int64_t step) const { return (fs::path(folder_) / checkpoint_name(step)).string(); }

std::string CheckpointFolder::latest() const {
  const auto all = list();
  return all.empty() ? "" : all.back();
}

CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  optim::ShardLayout layout;
  return load_checkpoint_and_layout(path, model, optimizer, layout);
}

CheckpointState load_checkpoint_and_layout(const std::string& path, torch::nn::Module& model,
                                           torch::optim::Optimizer& optimizer, optim::ShardLayout& layout) {
  auto archive = open_checkpoint(path);

  CheckpointState state;
  state.position.epoch = read_int(archive, "epoch", path);
  state.position.batch = read_int(archive, "batch", path);
  state.position.step = read_int(archive, "step", path);
  state.position.world_size = read_int(archive, "world_size", path);
  torch::Tensor global_batch;  // absent from checkpoints written before it
  if (archive.try_read("global_batch_size", global_batch))
    state.position.global_batch_size = global_batch.item<int64_t>();
  torch::Tensor dataset_size;  // the same
  if (archive.try_read("dataset_size", dataset_size)) state.position.dataset_size = dataset_size.item<int64_t>();
  torch::Tensor name;
  if (archive.try_read("model_name", name)) state.model_name = detail::text_of(name);
  archive.try_read("rng_states", state.rng_states);
  torch::Tensor order;
  if (archive.try_read("bucket_order", order)) state.bucket_order = detail::as_int64_vector(order);

  // Check every tensor before changing any, so that a checkpoint of another model leaves
  // this one as it was.
  const std::string from = state.model_name.empty() ? "" : " (saved from model '" + state.model_name + "')";
  const auto saved = saved_model_tensors(archive, path);
  auto mine = model_tensors(model);
  check_same_tensors(saved, mine, path + from);

  if (layout.read(archive)) {
    optim::read_optimizer_shards(path, state.position.step, layout, optim::StateFiles(optimizer).indices_to_read(),
                                 optimizer);
  } else {
    torch::serialize::InputArchive optimizer_archive;
    if (!archive.try_read("optimizer", optimizer_archive))
      throw DataError(path + ": not a lockstep checkpoint (no optimizer)");
    try {
      optimizer.load(optimizer_archive);
    } catch (const c10::Error& e) {
      throw DataError(path + ": its optimizer state does not fit this optimizer: " + e.what_without_backtrace());
    }
    optim::move_state_to_parameters(optimizer);
  }
  copy_tensors(saved, mine);
  return state;
}

void load_model_weights(const std::string& path, torch::nn::Module& model) {
  auto archive = open_checkpoint(path);
  const auto saved = saved_model_tensors(archive, path);
  auto mine = model_tensors(model);
  check_same_tensors(saved, mine, path);
  copy_tensors(saved, mine);
}

std::vector<std::pair<std::string, torch::Tensor>> load_state_dict(const std::string& path) {
  auto archive = open_checkpoint(path);
  std::vector<std::pair<std::string, torch::Tensor>> parameters, buffers;
  for (const auto& [key, tensor] : saved_model_tensors(archive, path)) {
    const auto colon = key.find(':');
    auto& kind = key.compare(0, colon, "param") == 0 ? parameters : buffers;
    kind.emplace_back(key.substr(colon + 1), tensor);
  }
  parameters.insert(parameters.end(), buffers.begin(), buffers.end());
  return parameters;
}

}  // namespace lockstep::train
