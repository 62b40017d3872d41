#include "launch/agent_store.h"

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "lockstep/comm/error.h"

namespace lockstep::launch {
namespace {

// The launcher's own client connects to a server in the same process; if that takes longer
// than this, --master-addr does not name this machine.
constexpr std::chrono::seconds kSelfConnectTimeout{30};

// c10d logs every failed bind as it goes, then throws an error that repeats them all; the
// launcher reports that error once, in one line.
class QuietC10dLogs {
 public:
  QuietC10dLogs() : saved_level_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = kFatalOnly; }
  ~QuietC10dLogs() { FLAGS_caffe2_log_level = saved_level_; }

 private:
  static constexpr int kFatalOnly = 3;
  int saved_level_;
};

// c10d's message lists each address it tried as "... (errno: 98 - Address already in use)";
// the first such reason is the one line worth showing.
std::string reason_of(const std::string& message) {
  std::size_t errno_start = message.find("(errno: ");
  std::size_t reason_start = message.find(" - ", errno_start);
  std::size_t reason_end = message.find(')', reason_start);
  if (errno_start == std::string::npos || reason_start == std::string::npos ||
      reason_end == std::string::npos) {
    return message.substr(0, message.find('\n'));
  }
  return message.substr(reason_start + 3, reason_end - reason_start - 3);
}

}  // namespace

AgentStore::AgentStore(const std::string& host, int port) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = kSelfConnectTimeout;
  try {
    QuietC10dLogs quiet;
    store_ = std::make_unique<c10d::TCPStore>(host, options);
  } catch (const std::exception& error) {
    throw Error("cannot host the store on port " + std::to_string(port) + ": " + reason_of(error.what()) +
                "; pick a free --master-port");
  }
}

AgentStore::~AgentStore() = default;

int AgentStore::port() const { return store_->getPort(); }

}  // namespace lockstep::launch
