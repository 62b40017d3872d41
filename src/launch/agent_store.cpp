#include "launch/agent_store.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "job/quiet_c10d.h"
#include "job/tcp_store_options.h"
#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

// The launcher's own client connects to a server in the same process; if that takes longer
// than this, --master-addr does not name this machine.
constexpr std::chrono::seconds kSelfConnectTimeout{30};

}  // namespace

AgentStore::AgentStore(const std::string& host, int port) {
  c10d::TCPStoreOptions options = tcp_store_options(port, /*is_server=*/true, kSelfConnectTimeout);
  try {
    QuietC10dLogs quiet;
    store_ = std::make_unique<c10d::TCPStore>(host, options);
  } catch (const std::exception& error) {
    throw Error("cannot host the store on port " + std::to_string(port) + ": " + c10d_reason(error.what()) +
                "; pick a free --master-port");
  }
}

AgentStore::~AgentStore() = default;

int AgentStore::port() const { return store_->getPort(); }

}  // namespace lockstep::launch
