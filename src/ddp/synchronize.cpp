#include "lockstep/ddp/synchronize.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Type.h>
#include <torch/utils.h>

#include "comm/calls/call.h"
#include "ddp/optimizer_kinds.h"
#include "ddp/optimizer_state_table.h"
#include "ddp/synchronize_parts.h"
#include "ddp/tensors_by_device.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"

namespace lockstep {
namespace {

// ---- agreeing on what is synchronized ----

// One tensor as ranks compare it, e.g. "parameter 'fc2.weight'" and "[10, 128] float32".
struct Entry {
  std::string label;
  std::string detail;
};

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
  out << "] " << dtype_name(t.scalar_type());
  return out.str();
}

// FNV-1a: stable across processes and builds, unlike std::hash.
int64_t fingerprint(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return static_cast<int64_t>(hash);
}

std::string join(const std::vector<Entry>& entries) {
  std::string text;
  for (const auto& e : entries) text += e.label + '\t' + e.detail + '\n';
  return text;
}

std::vector<Entry> split(const std::string& text) {
  std::vector<Entry> entries;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    entries.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return entries;
}

// Every rank's text, padded to the longest so that all_gather sees one shape everywhere.
std::vector<std::string> gather_texts(const ProcessGroup& group, const std::string& text,
                                      const std::vector<int64_t>& lengths) {
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::copy(text.begin(), text.end(), mine.data_ptr<uint8_t>());
  std::vector<std::string> texts;
  const auto parts = all_gather(mine, group);
  for (size_t r = 0; r < parts.size(); ++r) {
    const auto* bytes = parts[r].data_ptr<uint8_t>();
    texts.emplace_back(bytes, bytes + lengths[r]);
  }
  return texts;
}

std::string first_difference(const std::string& who, const std::string& what, int rank,
                             const std::vector<Entry>& theirs, int root, const std::vector<Entry>& roots) {
  size_t i = 0;
  while (i < theirs.size() && i < roots.size() && theirs[i].label == roots[i].label &&
         theirs[i].detail == roots[i].detail) {
    ++i;
  }
  const std::string on_rank = " on rank " + std::to_string(rank);
  const std::string on_root = " on rank " + std::to_string(root);
  const std::string head = who + ": rank " + std::to_string(rank) + "'s " + what +
                           " differs from rank " + std::to_string(root) + "'s";
  if (i < theirs.size() && i < roots.size() && theirs[i].label == roots[i].label) {
    return head + " at " + roots[i].label + ": " + theirs[i].detail + on_rank + " vs " +
           roots[i].detail + on_root;
  }
  auto entry_at = [i](const std::vector<Entry>& entries) {
    return i < entries.size() ? entries[i].label + " (" + entries[i].detail + ")" : "nothing";
  };
  return head + ": rank " + std::to_string(rank) + " has " + entry_at(theirs) + " where rank " +
         std::to_string(root) + " has " + entry_at(roots);
}

// Checks, in one small all_gather, that every rank passed the same root and holds the same
// list of tensors. When they differ, a second all_gather brings every rank's list to every
// rank, so that all of them throw the same MismatchError instead of some hanging.
void agree_with_root(const std::string& who, const std::string& what, const std::vector<Entry>& entries,
                     int root, const ProcessGroup& group) {
  const std::string text = join(entries);
  const at::Tensor mine = at::tensor(
      std::vector<int64_t>{fingerprint(text), static_cast<int64_t>(text.size()), root}, at::kLong);
  std::vector<int64_t> fingerprints, lengths, roots;
  for (const auto& part : all_gather(mine, group)) {
    const auto* values = part.data_ptr<int64_t>();
    fingerprints.push_back(values[0]);
    lengths.push_back(values[1]);
    roots.push_back(values[2]);
  }
  const int n = static_cast<int>(roots.size());
  for (int r = 1; r < n; ++r) {
    if (roots[r] != roots[0]) {
      throw MismatchError(who + ": ranks passed different roots: rank " +
                          std::to_string(r) + " passed root " + std::to_string(roots[r]) +
                          " but rank 0 passed root " + std::to_string(roots[0]));
    }
  }
  if (root < 0 || root >= n) {
    throw Error(who + ": root " + std::to_string(root) +
                " is not a rank; ranks are 0.." + std::to_string(n - 1));
  }
  bool same = true;
  for (int r = 0; r < n; ++r) same = same && fingerprints[r] == fingerprints[root];
  if (same) return;
  const auto texts = gather_texts(group, text, lengths);
  for (int r = 0; r < n; ++r) {
    if (texts[r] != texts[root]) {
      throw MismatchError(first_difference(who, what, r, split(texts[r]), root, split(texts[root])));
    }
  }
}

// ---- moving tensors ----

// Root broadcasts its options and state tables, every rank shapes its state like root's,
// then root broadcasts the state tensors (one collective per dtype each time).
template <typename Kind>
void synchronize_state(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
                       const std::vector<std::string>& labels, int root,
                       const ProcessGroup& group) {
  const bool is_root = group.rank() == root;
  const auto options = detail::options_of<Kind>(optimizer);
  std::vector<at::Tensor> tables{detail::options_table<Kind>(options),
                                 detail::state_table<Kind>(optimizer, params)};
  broadcast(tables, root, group);

  const at::Tensor unlike = (tables[1] == detail::kUnlikeParameter).nonzero();
  if (unlike.size(0) > 0) {
    const int64_t param = unlike[0][0].item<int64_t>();
    const int64_t field = unlike[0][1].item<int64_t>() - 1;
    throw Error("lockstep::synchronize: rank " + std::to_string(root) + "'s " + Kind::name +
                " state for " + labels[param] + ": its " +
                detail::state_field_names<Kind>()[field] +
                " does not have the parameter's shape and dtype (" + describe(params[param]) +
                "); fix that state (or the checkpoint it came from) on rank " +
                std::to_string(root));
  }
  if (!is_root) detail::set_options<Kind>(options, tables[0]);
  detail::broadcast_into(detail::match_state<Kind>(optimizer, params, tables[1], is_root), root, group);
}

}  // namespace

void synchronize(torch::nn::Module& module, int root, const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  std::vector<Entry> entries;
  std::vector<at::Tensor> tensors;
  auto add = [&](const std::string& kind, const auto& named) {
    for (const auto& item : named) {
      if (!item.value().defined()) continue;
      entries.push_back({kind + " '" + item.key() + "'", describe(item.value())});
      tensors.push_back(item.value());
    }
  };
  add("parameter", module.named_parameters(/*recurse=*/true));
  add("buffer", module.named_buffers(/*recurse=*/true));
  agree_with_root("lockstep::synchronize", "module", entries, root, group);
  detail::broadcast_into(tensors, root, group);
}

namespace detail {

void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group) {
  for (const auto& indices : indices_by_device(tensors)) {
    std::vector<at::Tensor> staged, wire;
    for (size_t i : indices) {
      staged.push_back(tensors[i].contiguous());
      wire.push_back(is_supported_dtype(tensors[i].scalar_type()) ? staged.back()
                                                                  : staged.back().view(-1).view(at::kByte));
    }
    broadcast(wire, root, group);
    if (group.rank() == root) continue;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!staged[k].is_same(tensors[indices[k]])) tensors[indices[k]].copy_(staged[k]);
    }
  }
}

ParamGroupsLabels agree_on_param_groups(const std::string& who, torch::optim::Optimizer& optimizer, int root,
                                        const ProcessGroup& group) {
  const std::string type = c10::demangle(typeid(optimizer).name());
  std::string kind = "unsupported " + type;
  visit_kind(optimizer, [&](auto k) { kind = decltype(k)::name; });

  std::vector<Entry> entries{{"the optimizer type", kind}};
  ParamGroupsLabels listed;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string param_group = "param group " + std::to_string(g);
    entries.push_back({param_group, std::to_string(groups[g].params().size()) + " parameters"});
    for (size_t i = 0; i < groups[g].params().size(); ++i) {
      listed.labels.push_back(param_group + ", parameter " + std::to_string(i));
      listed.params.push_back(groups[g].params()[i]);
      entries.push_back({listed.labels.back(), describe(listed.params.back())});
    }
  }
  agree_with_root(who, "optimizer", entries, root, group);
  return listed;
}

}  // namespace detail

void synchronize(torch::optim::Optimizer& optimizer, int root, const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  const auto listed = detail::agree_on_param_groups("lockstep::synchronize", optimizer, root, group);
  const bool supported = detail::visit_kind(optimizer, [&](auto k) {
    synchronize_state<decltype(k)>(optimizer, listed.params, listed.labels, root, group);
  });
  if (!supported) {
    throw Error("lockstep::synchronize: cannot synchronize the state of " + c10::demangle(typeid(optimizer).name()) +
                "; supported optimizers are " + detail::kSupportedKindNames +
                " (and classes derived from them)");
  }
}

}  // namespace lockstep
