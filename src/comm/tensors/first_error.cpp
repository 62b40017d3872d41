#include "comm/tensors/first_error.h"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"

namespace lockstep::detail {
namespace {

constexpr int64_t kMessageBytes = 2048;  // longer messages are cut

}  // namespace

void throw_first_error(const std::string& error, const ProcessGroup& group) {
  at::Tensor first = at::tensor({static_cast<int64_t>(error.empty() ? group.size() : group.rank())});
  all_reduce(first, ReduceOp::Min, group);
  const int failed = static_cast<int>(first.item<int64_t>());
  if (failed == group.size()) return;
  auto message = at::zeros({kMessageBytes}, at::kByte);
  std::memcpy(message.data_ptr(), error.data(), std::min<size_t>(error.size(), kMessageBytes - 1));
  broadcast(message, failed, group);
  const std::string text(static_cast<const char*>(message.data_ptr()));
  throw DataError(group.rank() == failed ? text : "rank " + std::to_string(failed) + ": " + text);
}

}  // namespace lockstep::detail
