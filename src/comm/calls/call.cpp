#include "comm/calls/call.h"

#include <sstream>
#include <type_traits>

namespace lockstep {
namespace {

// FNV-1a over whole 64-bit values, each product folded onto itself so that high bits reach
// the low ones: tiny and stable across builds and machines (std::hash is neither
// guaranteed), and a word per step rather than a byte, since every collective hashes its call.
class WordHash {
 public:
  template <typename T>
  void add(T value) {
    static_assert(std::is_integral<T>::value || std::is_enum<T>::value, "hash integers");
    hash_ = (hash_ ^ static_cast<uint64_t>(value)) * 0x100000001b3ULL;
    hash_ ^= hash_ >> 32;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

constexpr size_t kMaxTensorsDescribed = 4;

}  // namespace

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBool: return "bool";
    case at::kByte: return "uint8";
    case at::kBFloat16: return "bfloat16";
    default: break;
  }
  const std::string bits = std::to_string(8 * c10::elementSize(dtype));
  if (at::isComplexType(dtype)) return "complex" + bits;
  if (at::isFloatingType(dtype)) return "float" + bits;
  if (at::isIntegralType(dtype, /*includeBool=*/false)) return "int" + bits;
  return c10::toString(dtype);  // quantized types
}

std::string to_string(Collective kind) {
  switch (kind) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::ReduceToOwners: return "reduce_to_owners";
    case Collective::Barrier: return "barrier";
    case Collective::NewGroup: return "new_group";
    case Collective::EmptyShared: return "empty_shared";
  }
  return "collective";
}

Call::Call(Collective kind, const std::vector<at::Tensor>& tensors, ReduceOp op, int root)
    : kind(kind), op(op), root(root) {
  for (const auto& t : tensors) {
    dtypes.push_back(t.scalar_type());
    shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  }
  if (!tensors.empty()) device_type = tensors.front().device().type();
}

std::string Call::describe() const {
  std::ostringstream out;
  out << to_string(kind) << " #" << seq << " (";
  if (dtypes.size() > 1) out << dtypes.size() << " tensors: ";
  for (size_t i = 0; i < dtypes.size() && i < kMaxTensorsDescribed; ++i) {
    out << (i ? ", " : "") << dtype_name(dtypes[i]) << "[";
    for (size_t d = 0; d < shapes[i].size(); ++d) out << (d ? ", " : "") << shapes[i][d];
    out << "]";
  }
  if (dtypes.size() > kMaxTensorsDescribed) out << ", ...";
  if (device_type != at::kCPU) out << " on " << at::DeviceTypeName(device_type, /*lower_case=*/true);
  const bool reduces = kind == Collective::AllReduce || kind == Collective::Reduce ||
                       kind == Collective::ReduceScatter || kind == Collective::ReduceToOwners;
  if (reduces) out << (dtypes.empty() ? "" : ", ") << to_string(op);
  if (kind == Collective::Broadcast || kind == Collective::Reduce) out << ", root " << root;
  if (kind == Collective::ReduceToOwners) out << ", ranges " << std::hex << layout << std::dec;
  out << ")";
  return out.str();
}

uint64_t Call::fingerprint() const {
  WordHash h;
  h.add(kind);
  h.add(op);
  h.add(root);
  h.add(seq);
  h.add(device_type);
  h.add(layout);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    h.add(dtypes[i]);
    h.add(shapes[i].size());
    for (auto d : shapes[i]) h.add(d);
  }
  return h.value();
}

uint32_t Call::tag() const {
  const uint64_t f = fingerprint();
  // Low 4 bits clear: the tags of a packed call's 16 dtypes at most stay below the reserved ones.
  return static_cast<uint32_t>(f ^ (f >> 32)) % kFirstReservedTag & ~0xfu;
}

}  // namespace lockstep
