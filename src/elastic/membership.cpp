#include "elastic/membership.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/world/environment.h"
#include "job/tcp_store_options.h"
#include "lockstep/error.h"

namespace lockstep::elastic {
namespace {

using Clock = std::chrono::steady_clock;

// Short pauses at first, for a quick change; longer while one waits, to spare the store.
class Pause {
 public:
  void operator()() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::milliseconds(50));
  }

 private:
  std::chrono::milliseconds pause_{1};
};

std::vector<Member> parse_members(const std::string& record) {
  std::vector<Member> members;
  std::istringstream in(record);
  std::string name;
  while (in >> name) {
    const auto colon = name.find(':');
    members.push_back({std::stoi(name.substr(0, colon)), std::stoi(name.substr(colon + 1))});
  }
  return members;
}

std::string record_of(const std::vector<Member>& members) {
  std::string record;
  for (const Member& m : members) record += (record.empty() ? "" : " ") + member_name(m);
  return record;
}

std::string describe(const std::vector<Member>& members) {
  std::string text;
  for (const Member& m : members) text += (text.empty() ? "" : ", ") + std::to_string(m.id);
  return (members.size() == 1 ? "worker " : "workers ") + text;
}

std::string seconds(std::chrono::milliseconds timeout) {
  std::ostringstream text;
  text << std::chrono::duration<double>(timeout).count() << " s";
  return text.str();
}

std::string generation_key(int generation, const std::string& name) {
  return "generation-" + std::to_string(generation) + "/" + name;
}

}  // namespace

std::unique_ptr<Membership> Membership::from_environment() {
  const char* recovery = std::getenv("LOCKSTEP_RECOVERY");
  if (recovery == nullptr || std::string(recovery) != "live") return nullptr;
  const WorldSpec spec = discover_world(InitOptions(), process_environment());
  if (spec.method != InitMethod::Tcp) {
    throw ConfigError("lockstep: LOCKSTEP_RECOVERY=live needs the store of `lockstep run` (MASTER_ADDR, MASTER_PORT)");
  }
  const char* min = std::getenv("LOCKSTEP_MIN_WORKERS");
  return std::make_unique<Membership>(spec.master_addr, spec.master_port, spec.restart_count,
                                      Member{spec.member_id, spec.incarnation}, spec.world_size, spec.timeout,
                                      min != nullptr ? std::max(1, std::atoi(min)) : 1);
}

Membership::Membership(std::string store_host, int store_port, int attempt, Member me, int launched_world_size,
                       std::chrono::milliseconds timeout, int min_members)
    : attempt_(attempt),
      me_(me),
      launched_world_size_(launched_world_size),
      min_members_(min_members),
      timeout_(timeout) {
  // The store's own calls are quick; `timeout` bounds the waits for the other members.
  const auto options = tcp_store_options(store_port, /*is_server=*/false, std::chrono::seconds(30));
  store_ = std::make_unique<c10d::TCPStore>(store_host, options);
  watch_store_ = std::make_unique<c10d::TCPStore>(store_host, options);
  for (int id = 0; id < launched_world_size; ++id) members_.push_back({id, 0});
  watching_ = rank() == 0;
  watcher_ = std::thread([this] { watch_joiners(); });
}

Membership::~Membership() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  watcher_.join();
  // c10d's client can end the process from its destructor when its server (the launcher)
  // has gone, which this worker cannot know beforehand: left to the end of the process.
  (void)store_.release();
  (void)watch_store_.release();
}

std::string Membership::missing() const {
  std::vector<Member> gone;
  for (int id = 0; id < launched_world_size_; ++id) {
    const bool present = std::any_of(members_.begin(), members_.end(), [id](const Member& m) { return m.id == id; });
    if (!present) gone.push_back({id, 0});
  }
  return gone.empty() ? "" : describe(gone);
}

int Membership::rank() const {
  return static_cast<int>(std::find(members_.begin(), members_.end(), me_) - members_.begin());
}

bool Membership::has(const std::string& name) { return store_->check({key(name)}); }

std::string Membership::read(const std::string& name) {
  const auto bytes = store_->get(key(name));
  return std::string(bytes.begin(), bytes.end());
}

void Membership::write(const std::string& name, const std::string& value) {
  store_->set(key(name), std::vector<uint8_t>(value.begin(), value.end()));
}

void Membership::adopt(int generation, const std::string& record) {
  std::vector<Member> next = parse_members(record);
  left_.clear();
  for (const Member& m : members_) {
    if (std::find(next.begin(), next.end(), m) == next.end()) left_.push_back(m);
  }
  members_ = std::move(next);
  generation_ = generation;
  watching_ = rank() == 0;
  joiner_waiting_ = false;
}

bool Membership::wait_for_admission() {
  const int64_t place = store_->add(key("joiners/count"), 1);
  write("joiners/" + std::to_string(place), member_name(me_));
  const auto deadline = Clock::now() + timeout_;
  Pause pause;
  for (;;) {
    if (has("generation")) {
      const int generation = std::stoi(read("generation"));
      if (generation > generation_) {
        const std::string record = read(generation_key(generation, "members"));
        const auto members = parse_members(record);
        if (std::find(members.begin(), members.end(), me_) != members.end()) {
          adopt(generation, record);
          return true;
        }
      }
    }
    if (has("finished")) return false;
    if (Clock::now() >= deadline) {
      throw TimeoutError("lockstep: worker " + std::to_string(me_.id) + ", started again, was not admitted within " +
                         seconds(timeout_) + " (LOCKSTEP_TIMEOUT): do the others still train?");
    }
    pause();
  }
}

void Membership::form_next() {
  const int next = generation_ + 1;
  write(generation_key(next, "goes-on/" + member_name(me_)), "1");
  const auto deadline = Clock::now() + timeout_;
  Pause pause;
  for (;;) {
    std::vector<Member> unknown;
    for (const Member& m : members_) {
      if (m == me_ || has(generation_key(next, "goes-on/" + member_name(m))) || store_->check({ended_key(attempt_, m)}))
        continue;
      unknown.push_back(m);
    }
    if (unknown.empty()) break;
    if (Clock::now() >= deadline) {
      throw TimeoutError("lockstep: worker " + std::to_string(me_.id) + ": " + describe(unknown) +
                         " neither went on to generation " + std::to_string(next) + " nor ended within " +
                         seconds(timeout_) + " (LOCKSTEP_TIMEOUT); does its launcher watch its heartbeats?");
    }
    pause();
  }
  // One member composes the generation, so that every member adopts the same.
  if (store_->add(key(generation_key(next, "forming")), 1) == 1) {
    write(generation_key(next, "members"), compose_next());
    write("generation", std::to_string(next));
  }
  const auto members = generation_key(next, "members");
  while (!has(members)) {
    if (Clock::now() >= deadline) {
      throw TimeoutError("lockstep: worker " + std::to_string(me_.id) + ": generation " + std::to_string(next) +
                         " was not formed within " + seconds(timeout_) + " (LOCKSTEP_TIMEOUT)");
    }
    pause();
  }
  adopt(next, read(members));
  if (rank() == static_cast<int>(members_.size())) {
    throw Error("lockstep: worker " + std::to_string(me_.id) + " was left out of generation " + std::to_string(next) +
                ": its launcher said it had ended");
  }
}

// The members of this generation that went on and have not ended since, in their order,
// then the joiners that wait and have not ended, in the order they came.
std::string Membership::compose_next() {
  const int next = generation_ + 1;
  std::vector<Member> members;
  for (const Member& m : members_) {
    if (has(generation_key(next, "goes-on/" + member_name(m))) && !store_->check({ended_key(attempt_, m)}))
      members.push_back(m);
  }
  const int64_t admitted = has("joiners/admitted") ? std::stoll(read("joiners/admitted")) : 0;
  const int64_t waiting = store_->add(key("joiners/count"), 0);
  for (int64_t place = admitted + 1; place <= waiting; ++place) {
    const std::string joiner = "joiners/" + std::to_string(place);
    store_->wait({key(joiner)}, std::chrono::seconds(10));  // written right after it was counted
    const Member m = parse_members(read(joiner)).at(0);
    if (!store_->check({ended_key(attempt_, m)})) members.push_back(m);
  }
  write("joiners/admitted", std::to_string(waiting));
  return record_of(members);
}

// One store request per poll while nobody joins: the count of joiners that ever came,
// against the count admitted (read again only when more came than were last admitted).
void Membership::watch_joiners() {
  int64_t admitted = 0;
  while (!stopping_) {
    if (watching_) {
      try {
        const int64_t came = watch_store_->add(key("joiners/count"), 0);
        if (came > admitted && watch_store_->check({key("joiners/admitted")})) {
          const auto bytes = watch_store_->get(key("joiners/admitted"));
          admitted = std::stoll(std::string(bytes.begin(), bytes.end()));
        }
        joiner_waiting_ = came > admitted;
      } catch (const std::exception&) {
        return;  // the store is gone: the job ends with it
      }
    }
    std::unique_lock<std::mutex> lock(stop_mutex_);
    stop_.wait_for(lock, kWatchEvery, [this] { return stopping_.load(); });
  }
}

}  // namespace lockstep::elastic
