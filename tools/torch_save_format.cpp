#include "torch_save_format.h"

#include <cstdint>
#include <fstream>

#include <caffe2/serialize/inline_container.h>

#include "lockstep/error.h"

namespace lockstep::tools {
namespace {

// The subset of pickle protocol 2 that torch.save's data.pkl uses (Python's pickletools
// documents each opcode).
class PickleWriter {
 public:
  PickleWriter() { bytes_ += "\x80\x02"; }  // PROTO 2

  void op(char code) { bytes_ += code; }
  void mark() { op('('); }
  void string(const std::string& text) {
    op('X');  // BINUNICODE: a 4-byte little-endian length, then UTF-8
    little_endian(static_cast<uint64_t>(text.size()), 4);
    bytes_ += text;
  }
  void global(const std::string& module, const std::string& name) { bytes_ += "c" + module + "\n" + name + "\n"; }
  void integer(int64_t value) {
    if (value >= 0 && value < 256) {
      op('K');  // BININT1
      little_endian(static_cast<uint64_t>(value), 1);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
      op('J');  // BININT
      little_endian(static_cast<uint64_t>(value), 4);
    } else {
      bytes_ += "\x8a\x08";  // LONG1 of 8 bytes, two's complement
      little_endian(static_cast<uint64_t>(value), 8);
    }
  }
  void tuple_of(at::IntArrayRef values) {
    mark();
    for (int64_t value : values) integer(value);
    op('t');  // TUPLE
  }
  const std::string& finish() {
    op('.');  // STOP
    return bytes_;
  }

 private:
  void little_endian(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }

  std::string bytes_;
};

// The storage class torch.save names for each element type.
std::string storage_class(const std::string& name, const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return "FloatStorage";
    case at::kDouble: return "DoubleStorage";
    case at::kHalf: return "HalfStorage";
    case at::kBFloat16: return "BFloat16Storage";
    case at::kLong: return "LongStorage";
    case at::kInt: return "IntStorage";
    case at::kShort: return "ShortStorage";
    case at::kChar: return "CharStorage";
    case at::kByte: return "ByteStorage";
    case at::kBool: return "BoolStorage";
    default:
      throw Error("cannot export " + name + ": tensors of " + std::string(c10::toString(tensor.scalar_type())) +
                  " are not written for torch.load");
  }
}

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks), with
// the storage a persistent id ('storage', class, record key, location, element count).
void push_tensor(PickleWriter& pickle, const std::string& name, const at::Tensor& tensor, const std::string& key) {
  pickle.global("torch._utils", "_rebuild_tensor_v2");
  pickle.mark();
  pickle.mark();
  pickle.string("storage");
  pickle.global("torch", storage_class(name, tensor));
  pickle.string(key);
  pickle.string("cpu");
  pickle.integer(tensor.numel());
  pickle.op('t');  // TUPLE
  pickle.op('Q');  // BINPERSID
  pickle.integer(0);
  pickle.tuple_of(tensor.sizes());
  pickle.tuple_of(tensor.strides());
  pickle.op('\x89');  // NEWFALSE: requires_grad
  pickle.global("collections", "OrderedDict");
  pickle.op(')');  // EMPTY_TUPLE
  pickle.op('R');  // REDUCE: an empty OrderedDict of backward hooks
  pickle.op('t');  // TUPLE
  pickle.op('R');  // REDUCE
}

}  // namespace

void save_for_torch_load(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& path) {
  std::vector<at::Tensor> contiguous;
  PickleWriter pickle;
  pickle.op('}');  // EMPTY_DICT
  pickle.mark();
  for (const auto& [name, tensor] : tensors) {
    contiguous.push_back(tensor.detach().to(at::kCPU).contiguous());
    pickle.string(name);
    push_tensor(pickle, name, contiguous.back(), std::to_string(contiguous.size() - 1));
  }
  pickle.op('u');  // SETITEMS

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw Error("cannot write " + path);
  // libtorch's own zip writer, as torch.save uses it: records aligned for torch.load's mmap.
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
    file.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    return file ? size : 0;
  });
  const std::string& data_pkl = pickle.finish();
  writer.writeRecord("data.pkl", data_pkl.data(), data_pkl.size());
  writer.writeRecord("byteorder", "little", 6);
  for (size_t i = 0; i < contiguous.size(); ++i) {
    writer.writeRecord("data/" + std::to_string(i), contiguous[i].data_ptr(), contiguous[i].nbytes());
  }
  writer.writeEndOfFile();
  file.close();
  if (!file) throw Error("cannot write " + path + " (disk full?)");
}

}  // namespace lockstep::tools
