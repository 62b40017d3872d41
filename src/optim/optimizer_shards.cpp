#include "optim/optimizer_shards.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "comm/tensors/encoding.h"
#include "lockstep/error.h"
#include "optim/durable_file.h"
#include "optim/optimizer_kinds.h"
#include "optim/param_groups.h"
#include "optim/optimizer_state_table.h"

namespace lockstep::optim {
namespace {

// Written into every shard, so that another file is recognised as not being one.
constexpr int64_t kShardFormat = 1;

std::string kind_of(torch::optim::Optimizer& optimizer) {
  std::string kind;
  detail::visit_kind(optimizer, [&](auto k) { kind = decltype(k)::name; });
  return kind;
}

// Nested archives are keyed like module names: no dots.
std::string parameter_key(size_t index) { return "parameter_" + std::to_string(index); }

template <typename Kind>
void write_state(torch::serialize::OutputArchive& archive, torch::optim::Optimizer& optimizer,
                 const std::vector<torch::Tensor>& params, const std::vector<int>& owners, int rank) {
  auto& state = optimizer.state();
  std::vector<int64_t> written;
  for (size_t i = 0; i < params.size(); ++i) {
    if (owners[i] != rank) continue;
    const auto found = state.find(detail::state_key<std::decay_t<decltype(state)>>(params[i]));
    if (found == state.end() || !found->second) continue;
    torch::serialize::OutputArchive entry;
    Kind::each_state_field(static_cast<typename Kind::State&>(*found->second), [&](const char* name, auto& field) {
      if constexpr (detail::is_tensor<decltype(field)>) {
        if (field.defined()) entry.write(name, field.detach());
      } else {
        entry.write(name, torch::tensor(static_cast<int64_t>(field)));
      }
    });
    archive.write(parameter_key(i), entry);
    written.push_back(static_cast<int64_t>(i));
  }
  archive.write("parameters", torch::tensor(written, torch::kInt64));
}

// The state of `indices` that this shard holds, made anew in `optimizer`; those it has no
// state for (never stepped) are left without.
template <typename Kind>
void read_state(torch::serialize::InputArchive& shard, const std::string& file, torch::optim::Optimizer& optimizer,
                const std::vector<torch::Tensor>& params, const std::vector<size_t>& indices) {
  using State = typename Kind::State;
  auto& state = optimizer.state();
  using StateMap = std::decay_t<decltype(state)>;
  torch::Tensor listed;
  if (!shard.try_read("parameters", listed))
    throw DataError(file + ": not a lockstep optimizer shard (no parameter list)");
  const std::vector<int64_t> held = detail::as_int64_vector(listed);
  for (size_t i : indices) {
    const auto key = detail::state_key<StateMap>(params[i]);
    state.erase(key);
    if (std::find(held.begin(), held.end(), static_cast<int64_t>(i)) == held.end()) continue;
    torch::serialize::InputArchive entry;
    if (!shard.try_read(parameter_key(i), entry))
      throw DataError(file + ": no state for parameter " + std::to_string(i));
    auto read = std::make_unique<State>();
    Kind::each_state_field(*read, [&](const char* name, auto& field) {
      torch::Tensor value;
      if (!entry.try_read(name, value)) return;
      if constexpr (detail::is_tensor<decltype(field)>) {
        if (!detail::is_like(value, params[i])) {
          throw DataError(file + ": the " + name + " of parameter " + std::to_string(i) + " has shape " +
                          c10::str(value.sizes()) + " but the parameter " + c10::str(params[i].sizes()) +
                          "; is it a checkpoint of another model?");
        }
        field = value.to(params[i].device());
      } else {
        field = static_cast<std::decay_t<decltype(field)>>(value.item<int64_t>());
      }
    });
    state[key] = std::move(read);
  }
}

torch::serialize::InputArchive open_shard(const std::string& file, int64_t step, const ShardLayout& layout, int rank) {
  torch::serialize::InputArchive shard;
  try {
    if (!load_archive(shard, file)) {
      throw DataError(file +
                      ": no such optimizer shard; a sharded checkpoint needs the shard of every rank that wrote "
                      "it, in the folder of rank 0's file");
    }
  } catch (const c10::Error& e) {
    throw DataError(file + ": not a readable optimizer shard (corrupt or truncated?): " + e.what_without_backtrace());
  }
  torch::Tensor format, written_step, written_rank, written_world, kind;
  if (!shard.try_read("format", format) || format.item<int64_t>() != kShardFormat ||
      !shard.try_read("step", written_step) || !shard.try_read("rank", written_rank) ||
      !shard.try_read("world_size", written_world) || !shard.try_read("kind", kind)) {
    throw DataError(file + ": not a lockstep optimizer shard");
  }
  if (written_step.item<int64_t>() != step || written_rank.item<int64_t>() != rank ||
      written_world.item<int64_t>() != layout.world_size || detail::text_of(kind) != layout.kind) {
    throw DataError(file + ": written for step " + std::to_string(written_step.item<int64_t>()) + " by rank " +
                    std::to_string(written_rank.item<int64_t>()) + " of " +
                    std::to_string(written_world.item<int64_t>()) + " (" + detail::text_of(kind) +
                    "), not for this checkpoint of step " + std::to_string(step));
  }
  return shard;
}

}  // namespace

void ShardLayout::write(torch::serialize::OutputArchive& archive) const {
  torch::serialize::OutputArchive layout;
  layout.write("kind", detail::text_tensor(kind));
  layout.write("world_size", torch::tensor(world_size));
  layout.write("owners", torch::tensor(owners, torch::kInt64));
  layout.write("options", options);
  archive.write("optimizer_shards", layout);
}

bool ShardLayout::read(torch::serialize::InputArchive& archive) {
  torch::serialize::InputArchive layout;
  if (!archive.try_read("optimizer_shards", layout)) return false;
  torch::Tensor kind_text, world, owner_list;
  layout.read("kind", kind_text);
  layout.read("world_size", world);
  layout.read("owners", owner_list);
  layout.read("options", options);
  kind = detail::text_of(kind_text);
  world_size = world.item<int64_t>();
  owners = detail::as_int64_vector(owner_list);
  return true;
}

std::string optimizer_shard_path(const std::string& checkpoint, int rank, int world_size) {
  const std::filesystem::path path(checkpoint);
  return (path.parent_path() /
          (path.stem().string() + ".optimizer-" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".pt"))
      .string();
}

ShardLayout shard_layout(torch::optim::Optimizer& optimizer, const std::vector<int>& owners, int world_size) {
  ShardLayout layout;
  layout.kind = kind_of(optimizer);
  layout.world_size = world_size;
  layout.owners.assign(owners.begin(), owners.end());
  detail::visit_kind(optimizer, [&](auto kind) {
    using Kind = decltype(kind);
    layout.options = detail::options_table<Kind>(detail::options_of<Kind>(optimizer));
  });
  return layout;
}

void write_optimizer_shard(const std::string& checkpoint, int64_t step, torch::optim::Optimizer& optimizer,
                           const std::vector<int>& owners, int rank, int world_size) {
  torch::serialize::OutputArchive shard;
  shard.write("format", torch::tensor(kShardFormat));
  shard.write("step", torch::tensor(step));
  shard.write("rank", torch::tensor(static_cast<int64_t>(rank)));
  shard.write("world_size", torch::tensor(static_cast<int64_t>(world_size)));
  shard.write("kind", detail::text_tensor(kind_of(optimizer)));
  const auto params = detail::parameters_of(optimizer);
  detail::visit_kind(optimizer,
                     [&](auto kind) { write_state<decltype(kind)>(shard, optimizer, params, owners, rank); });
  const std::string path = optimizer_shard_path(checkpoint, rank, world_size);
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);  // rank 0 may not have yet
  save_archive_atomically(shard, path);
}

void read_optimizer_shards(const std::string& checkpoint, int64_t step, const ShardLayout& layout,
                           const std::vector<size_t>& indices, torch::optim::Optimizer& optimizer) {
  const auto params = detail::parameters_of(optimizer);
  const std::string kind = kind_of(optimizer);
  if (layout.kind != kind) {
    throw DataError(checkpoint + ": its optimizer state is " + layout.kind + "'s, but this optimizer is " +
                    (kind.empty() ? "of another kind" : kind));
  }
  if (layout.owners.size() != params.size()) {
    throw DataError(checkpoint + ": its optimizer state is for " + std::to_string(layout.owners.size()) +
                    " parameters, but this optimizer has " + std::to_string(params.size()) +
                    "; is it a checkpoint of another model?");
  }
  std::map<int64_t, std::vector<size_t>> by_shard;
  for (size_t i : indices) by_shard[layout.owners[i]].push_back(i);
  for (const auto& [rank, wanted] : by_shard) {
    const std::string file =
        optimizer_shard_path(checkpoint, static_cast<int>(rank), static_cast<int>(layout.world_size));
    auto shard = open_shard(file, step, layout, static_cast<int>(rank));
    detail::visit_kind(optimizer, [&](auto k) { read_state<decltype(k)>(shard, file, optimizer, params, wanted); });
  }
  detail::visit_kind(optimizer, [&](auto kind) {
    using Kind = decltype(kind);
    const auto options = detail::options_of<Kind>(optimizer);
    if (layout.options.size(0) != static_cast<int64_t>(options.size())) {
      throw DataError(checkpoint + ": its optimizer has " + std::to_string(layout.options.size(0) - 1) +
                      " param groups, this one " + std::to_string(options.size() - 1));
    }
    detail::set_options<Kind>(options, layout.options.contiguous());
  });
}

}  // namespace lockstep::optim
