#include "comm/tensors/agree_with_root.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include <ATen/ATen.h>

#include "comm/calls/call.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"

namespace lockstep::detail {
namespace {

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
  const std::string head =
      who + ": rank " + std::to_string(rank) + "'s " + what + " differs from rank " + std::to_string(root) + "'s";
  if (i < theirs.size() && i < roots.size() && theirs[i].label == roots[i].label) {
    return head + " at " + roots[i].label + ": " + theirs[i].detail + on_rank + " vs " + roots[i].detail + on_root;
  }
  auto entry_at = [i](const std::vector<Entry>& entries) {
    return i < entries.size() ? entries[i].label + " (" + entries[i].detail + ")" : "nothing";
  };
  return head + ": rank " + std::to_string(rank) + " has " + entry_at(theirs) + " where rank " + std::to_string(root) +
         " has " + entry_at(roots);
}

}  // namespace

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
  out << "] " << dtype_name(t.scalar_type());
  return out.str();
}

void agree_with_root(const std::string& who, const std::string& what, const std::vector<Entry>& entries, int root,
                     const ProcessGroup& group) {
  const std::string text = join(entries);
  const at::Tensor mine =
      at::tensor(std::vector<int64_t>{fingerprint(text), static_cast<int64_t>(text.size()), root}, at::kLong);
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
      throw MismatchError(who + ": ranks passed different roots: rank " + std::to_string(r) + " passed root " +
                          std::to_string(roots[r]) + " but rank 0 passed root " + std::to_string(roots[0]));
    }
  }
  if (root < 0 || root >= n) {
    throw Error(who + ": root " + std::to_string(root) + " is not a rank; ranks are 0.." + std::to_string(n - 1));
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

}  // namespace lockstep::detail
