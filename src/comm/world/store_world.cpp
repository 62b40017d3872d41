#include "comm/world/world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/transports/gloo_compat.h"
#include "comm/transports/gloo_transport.h"
#include "job/process_sockets.h"
#include "job/heartbeat.h"
#include "job/job_identity.h"
#include "job/quiet_c10d.h"
#include "job/tcp_probe.h"
#include "job/tcp_store_options.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

using StorePtr = std::shared_ptr<gloo::rendezvous::Store>;

std::string first_line(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = torch_error ? torch_error->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

std::string seconds(std::chrono::milliseconds timeout) {
  std::ostringstream out;
  out << std::chrono::duration<double>(timeout).count() << " s";
  return out.str();
}

// libtorch's TCP store seen through gloo's store interface, its keys under a prefix.
class TorchStore : public gloo::rendezvous::Store {
 public:
  TorchStore(c10::intrusive_ptr<c10d::Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const auto data = store_->get(prefix_ + key);
    return std::vector<char>(data.begin(), data.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(prefixed(keys), timeout);
  }
  // Whether all `keys` are there, without waiting: a wait that times out leaves its waiter
  // registered on c10d's connection, whose late answer would then be read as another's.
  bool check(const std::vector<std::string>& keys) { return store_->check(prefixed(keys)); }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& key : keys) out.push_back(prefix_ + key);
    return out;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
};

// gloo's file store, with its check (whether keys are there, without waiting) made public.
class FileStore : public gloo::rendezvous::FileStore {
 public:
  using gloo::rendezvous::FileStore::check;
  using gloo::rendezvous::FileStore::FileStore;
};

std::string tcp_store_name(const WorldSpec& spec) {
  return "MASTER_ADDR=" + spec.master_addr + " MASTER_PORT=" + std::to_string(spec.master_port);
}

StorePtr open_tcp_store(const WorldSpec& spec) {
  c10d::TCPStoreOptions options =
      tcp_store_options(spec.master_port, /*is_server=*/spec.rank == 0 && !spec.store_hosted_by_launcher, spec.timeout);
  if (options.isServer) {
    check_port_free(spec.master_port);
  } else {
    wait_until_listening(spec.master_addr, spec.master_port, spec.timeout);
  }
  c10::intrusive_ptr<c10d::Store> store;
  try {
    QuietC10dLogs quiet;
    store = with_bounded_silence([&] { return c10::make_intrusive<c10d::TCPStore>(spec.master_addr, options); });
  } catch (const std::exception& e) {
    // Another process may take the port between check_port_free and this bind, and c10d's
    // store binds every interface with no way to hand it a bound socket, so that race
    // cannot be closed: its loser is told what the check would have told it.
    if (options.isServer) throw cannot_host_store(spec.master_port, c10d_reason(e.what()));
    throw ConfigError("lockstep: rank " + std::to_string(spec.rank) + " cannot reach the rendezvous store at " +
                      tcp_store_name(spec) + " within " + seconds(spec.timeout) + ": " + first_line(e) +
                      "; check that rank 0 runs and MASTER_ADDR is reachable from this machine");
  }
  // Before anything is written there: the store may be another job's (two jobs, one port).
  claim_store_for_job(*store, spec.job_id, "rank " + std::to_string(spec.rank), tcp_store_name(spec));
  // Ranks that init() again (after shutdown) meet under a fresh prefix: every rank adds one
  // per init, so the count tells which round this is. A restarted job counts afresh, as
  // ranks of the failed attempt may not all have joined.
  const std::string attempt = "lockstep/attempt-" + std::to_string(spec.restart_count) + "/";
  // A generation of live recovery is formed once, by its members: its keys are its own.
  if (spec.generation > 0) {
    return std::make_shared<TorchStore>(store, attempt + "generation-" + std::to_string(spec.generation) + "/");
  }
  const int64_t joined = store->add(attempt + "joined", 1);
  const int64_t round = (joined - 1) / spec.world_size;
  return std::make_shared<TorchStore>(store, attempt + std::to_string(round) + "/");
}

StorePtr open_file_store(const WorldSpec& spec) {
  const std::string where = "the store directory '" + spec.file_path + "' (LOCKSTEP_INIT_FILE)";
  std::error_code error;
  std::filesystem::create_directories(spec.file_path, error);
  if (error) throw ConfigError("lockstep: cannot create " + where + ": " + error.message());
  const auto probe = std::filesystem::path(spec.file_path) /
                     (".write-test-" + std::to_string(spec.rank) + "-" + std::to_string(getpid()));
  if (!std::ofstream(probe).good()) {
    throw ConfigError("lockstep: cannot write to " + where + ": " + std::strerror(errno) +
                      "; pass a directory every rank can write to");
  }
  std::filesystem::remove(probe, error);
  return std::make_shared<FileStore>(spec.file_path);
}

StorePtr open_store(const WorldSpec& spec) {
  switch (spec.method) {
    case InitMethod::Tcp: return open_tcp_store(spec);
    case InitMethod::File: return open_file_store(spec);
    case InitMethod::Auto: return std::make_shared<gloo::rendezvous::HashStore>();
    case InitMethod::Mpi: break;
  }
  throw ConfigError("lockstep: the gloo backend cannot meet through " + to_string(spec.method));
}

// The local address the kernel would use to reach `host`: the one other ranks can reach
// this rank on, whatever interfaces the machine has.
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
  std::string address;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = local.ss_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (inet_ntop(local.ss_family, raw, text, sizeof(text))) address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

gloo::transport::tcp::attr device_attr(const WorldSpec& spec) {
  gloo::transport::tcp::attr attr;
  if (!spec.socket_ifname.empty()) {
    attr.iface = spec.socket_ifname;
  } else if (spec.world_size == 1) {
    attr.hostname = "127.0.0.1";
  } else if (spec.method == InitMethod::Tcp) {
    attr.hostname = local_address_towards(spec.master_addr);
  }
  if (attr.iface.empty() && attr.hostname.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    attr.hostname = local_address_towards(name);
    if (attr.hostname.empty()) attr.hostname = "127.0.0.1";
  }
  return attr;
}

std::string store_name(const WorldSpec& spec) {
  return spec.method == InitMethod::Tcp ? "the TCP store at " + tcp_store_name(spec)
                                        : "the file store in '" + spec.file_path + "'";
}

// The ranks not yet seen, as "1, 3".
std::string unseen(const std::vector<bool>& seen) {
  std::ostringstream missing;
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) missing << (missing.tellp() > 0 ? ", " : "") << r;
  }
  return missing.str();
}

// Small strings from every rank, indexed by rank: each sets its own key under `key` and
// waits for all, naming the missing ranks if some never come. Values travel behind one
// byte, since gloo's file store cannot hold empty ones.
std::vector<std::string> gather_through(gloo::rendezvous::Store& store, const WorldSpec& spec, const std::string& key,
                                        const std::string& mine) {
  const std::string value = "=" + mine;
  store.set(key + "/" + std::to_string(spec.rank), std::vector<char>(value.begin(), value.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < spec.world_size; ++r) keys.push_back(key + "/" + std::to_string(r));
  // Polled without waiting (checks), remembering which keys have come: the ranks named at
  // the end are those never seen, even when the store went away first (rank 0, its host,
  // giving up a moment earlier takes it along).
  const auto present = [&store](const std::vector<std::string>& some) {
    if (auto* torch_store = dynamic_cast<TorchStore*>(&store)) return torch_store->check(some);
    if (auto* file_store = dynamic_cast<FileStore*>(&store)) return file_store->check(some);
    store.wait(some, std::chrono::milliseconds(1));  // in memory (a world of one): no connection to confuse
    return true;
  };
  std::vector<bool> seen(spec.world_size, false);
  seen[spec.rank] = true;
  const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
  auto last_sweep = std::chrono::steady_clock::time_point();
  // Short at first, for a quick rendezvous; longer while ranks are late, to spare the store.
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    std::vector<std::string> waiting;
    for (int r = 0; r < spec.world_size; ++r) {
      if (!seen[r]) waiting.push_back(keys[r]);
    }
    if (waiting.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    try {
      if (present(waiting)) {
        std::fill(seen.begin(), seen.end(), true);
        continue;
      }
      // Key by key once a second (one request each), and at the end, to name the missing.
      if (now - last_sweep >= std::chrono::seconds(1) || now >= deadline) {
        last_sweep = now;
        for (int r = 0; r < spec.world_size; ++r) {
          if (!seen[r] && present({keys[r]})) seen[r] = true;
        }
      }
    } catch (const std::exception&) {  // the store is gone: what was seen stays seen
    }
    if (now >= deadline) {
      const std::string missing = unseen(seen);
      if (missing.empty()) continue;
      throw TimeoutError("lockstep: rank " + std::to_string(spec.rank) + ": rendezvous through " + store_name(spec) +
                         " timed out after " + seconds(spec.timeout) + ": rank(s) " + missing +
                         " never arrived (world size " + std::to_string(spec.world_size) +
                         "); check that every worker started with the same settings");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  std::vector<std::string> all;
  for (const auto& k : keys) {
    const auto got = store.get(k);
    all.emplace_back(got.begin() + 1, got.end());
  }
  return all;
}

// The ranks meet through a store; the host backend is gloo, connected per group under the
// group's own key prefix.
class StoreWorld : public World {
 public:
  StoreWorld(const WorldSpec& spec, StorePtr store, std::vector<std::string> hosts)
      : World(spec, std::move(hosts)), store_(std::move(store)) {
    if (spec.heartbeat && spec.method == InitMethod::Tcp) {
      heartbeat_ = std::make_unique<Heartbeat>(spec.master_addr, spec.master_port,
                                               heartbeat_key(spec.restart_count, spec.member_id, spec.incarnation));
    }
  }

  std::vector<std::string> gather(const std::string& key, const std::string& mine) override {
    return gather_through(*store_, spec(), key, mine);
  }

  std::shared_ptr<gloo::rendezvous::Store> failure_store(const std::string& name) override {
    return gloo_compat::prefix_store(name + "/failures", store_);
  }

  std::unique_ptr<HostTransport> connect_backend(const std::vector<int>& ranks, const std::string& name) override {
    const int me = static_cast<int>(std::find(ranks.begin(), ranks.end(), spec().rank) - ranks.begin());
    auto store = gloo_compat::prefix_store(name, store_);
    auto context = std::make_shared<gloo::rendezvous::Context>(me, static_cast<int>(ranks.size()));
    context->setTimeout(spec().timeout);
    // The sockets gloo opens to connect are those of the process after, not before.
    // lockstep's other threads make their connections when they start, not meanwhile; one a
    // user's thread (or an HTTP data fetch) opens in these moments would be shut down with
    // them by an abort, after which the group has failed anyway.
    std::set<ino_t> opened;
    try {
      if (!device_) device_ = gloo::transport::tcp::CreateDevice(device_attr(spec()));
      const std::set<ino_t> before = process_sockets();
      gloo_compat::connect_full_mesh(*context, store, device_);
      opened = opened_since(before);
    } catch (const std::exception& e) {
      throw Error("lockstep: rank " + std::to_string(spec().rank) + " could not connect to the other ranks through " +
                  store_name(spec()) + ": " + e.what());
    }
    // The prefix store refers to store_, which this world keeps alive.
    return std::make_unique<GlooTransport>(context, store, spec().timeout, ranks, std::move(opened));
  }

 private:
  StorePtr store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::unique_ptr<Heartbeat> heartbeat_;  // while this rank is joined
};

}  // namespace

std::string host_identity(const WorldSpec& spec) {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string identity = name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  identity += " boot " + boot_id;
  for (const char* shared : {"/dev/shm", "/proc/self/ns/pid"}) {
    struct stat status {};
    if (stat(shared, &status) == 0) {
      identity += " " + std::to_string(status.st_dev) + ":" + std::to_string(status.st_ino);
    }
  }
  if (spec.node_rank) identity += " node " + std::to_string(*spec.node_rank);
  return identity;
}

namespace {

// This rank's place among the ranks of its host, and how many there are.
std::pair<int, int> local_place(const std::vector<std::string>& hosts, int rank) {
  int local_rank = 0, local_size = 0;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r] != hosts[rank]) continue;
    if (r < rank) ++local_rank;
    ++local_size;
  }
  return {local_rank, local_size};
}

}  // namespace

int World::local_rank() const { return spec_.local_rank.value_or(local_place(hosts_, spec_.rank).first); }

int World::local_world_size() const { return spec_.local_world_size.value_or(local_place(hosts_, spec_.rank).second); }

std::shared_ptr<World> join_world(const WorldSpec& spec) {
  if (spec.backend == Backend::Mpi) return join_mpi_world(spec);
  StorePtr store = open_store(spec);
  auto hosts = gather_through(*store, spec, "host", host_identity(spec));
  return std::make_shared<StoreWorld>(spec, std::move(store), std::move(hosts));
}

}  // namespace lockstep
