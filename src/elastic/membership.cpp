#include "elastic/membership.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/groups/regroup.h"
#include "comm/world/environment.h"
#include "job/process_sockets.h"
#include "job/store_values.h"
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

// A key of one generation's forming.
std::string in_generation(int generation, const std::string& name) {
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
  const char* max = std::getenv("LOCKSTEP_MAX_WORKERS");
  return std::make_unique<Membership>(spec.master_addr, spec.master_port, spec.restart_count,
                                      Member{spec.member_id, spec.incarnation},
                                      max != nullptr ? std::atoi(max) : spec.world_size, spec.timeout,
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
  const auto connect = [&] { return std::make_unique<c10d::TCPStore>(store_host, options); };
  store_ = with_bounded_silence(connect);
  watch_store_ = with_bounded_silence(connect);
  if (store_->check({members_key(attempt, 0)})) {
    members_ = parse_members(text_of(store_->get(members_key(attempt, 0))));
  } else {
    for (int id = 0; id < launched_world_size; ++id) members_.push_back({id, 0});
  }
  joiner_ = std::find(members_.begin(), members_.end(), me_) == members_.end();
  watched_members_ = members_;
  watching_ = rank() == 0;
  watcher_ = std::thread([this] { watch(); });
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

std::string Membership::read(const std::string& name) { return text_of(store_->get(key(name))); }

void Membership::write(const std::string& name, const std::string& value) { store_->set(key(name), bytes_of(value)); }

void Membership::adopt(int generation, const std::string& record) {
  std::vector<Member> next = parse_members(record);
  left_.clear();
  for (const Member& m : members_) {
    if (std::find(next.begin(), next.end(), m) == next.end()) left_.push_back(m);
  }
  members_ = std::move(next);
  generation_ = generation;
  {
    std::lock_guard<std::mutex> lock(watched_mutex_);
    watched_generation_ = generation;
    watched_members_ = members_;
  }
  watching_ = rank() == 0;
  joiner_waiting_ = false;
}

bool Membership::wait_for_admission() {
  const int64_t place = store_->add(key("joiners/count"), 1);
  write("joiners/" + std::to_string(place), member_name(me_));
  const auto deadline = Clock::now() + timeout_;
  Pause pause;
  for (;;) {
    if (store_->check({generation_key(attempt_)})) {
      const int generation = std::stoi(text_of(store_->get(generation_key(attempt_))));
      if (generation > generation_) {
        const std::string record = text_of(store_->get(members_key(attempt_, generation)));
        const auto members = parse_members(record);
        if (std::find(members.begin(), members.end(), me_) != members.end()) {
          adopt(generation, record);
          return true;
        }
      }
    }
    if (has("finished")) return false;
    if (Clock::now() >= deadline) {
      throw TimeoutError("lockstep: worker " + std::to_string(me_.id) + ", come to join, was not admitted within " +
                         seconds(timeout_) + " (LOCKSTEP_TIMEOUT): do the others still train?");
    }
    pause();
  }
}

void Membership::form_next() {
  if (store_lost_) {
    throw Error("lockstep: worker " + std::to_string(me_.id) +
                " lost the job's store (its host stopped answering for " + std::to_string(kStoreSilence.count()) +
                " s, or closed it): this worker is cut off from the others, or node 0 is gone, and ends");
  }
  const int next = generation_ + 1;
  write(in_generation(next, "goes-on/" + member_name(me_)), "1");
  const auto deadline = Clock::now() + timeout_;
  Pause pause;
  for (;;) {
    std::vector<Member> unknown;
    for (const Member& m : members_) {
      if (m == me_ || has(in_generation(next, "goes-on/" + member_name(m))) || store_->check({ended_key(attempt_, m)}))
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
  if (store_->add(key(in_generation(next, "forming")), 1) == 1) {
    store_->set(members_key(attempt_, next), bytes_of(compose_next()));
    store_->set(generation_key(attempt_), bytes_of(std::to_string(next)));
  }
  const auto members = members_key(attempt_, next);
  while (!store_->check({members})) {
    if (Clock::now() >= deadline) {
      throw TimeoutError("lockstep: worker " + std::to_string(me_.id) + ": generation " + std::to_string(next) +
                         " was not formed within " + seconds(timeout_) + " (LOCKSTEP_TIMEOUT)");
    }
    pause();
  }
  adopt(next, text_of(store_->get(members)));
  if (rank() == static_cast<int>(members_.size())) {
    throw Error("lockstep: worker " + std::to_string(me_.id) + " was left out of generation " + std::to_string(next) +
                ": its launcher said it had ended, or its node stopped answering");
  }
}

// The members of this generation that went on and have not ended since, in their order,
// then the joiners that wait and have not ended, in the order they came.
std::string Membership::compose_next() {
  const int next = generation_ + 1;
  std::vector<Member> members;
  for (const Member& m : members_) {
    if (has(in_generation(next, "goes-on/" + member_name(m))) && !store_->check({ended_key(attempt_, m)}))
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

// Two store requests per poll while nothing changes: the count of joiners that ever came
// (rank 0 only), and the count of ended marks.
void Membership::watch() {
  int64_t admitted = 0;
  int64_t ended_seen = 0;
  int checked_generation = 0;
  while (!stopping_) {
    try {
      if (watching_) watch_joiners(admitted);
      const int64_t ended = watch_store_->add(ended_count_key(attempt_), 0);
      const int generation = detail::generation();
      // Looked at again for a new generation too: a member may have ended while it formed.
      if (ended != ended_seen || generation != checked_generation) {
        ended_seen = ended;
        checked_generation = generation;
        abort_if_a_member_ended(generation);
      }
    } catch (const std::exception&) {
      // Cut off from the store (its calls fail after kStoreSilence), or node 0 is gone:
      // the others, if any are left, go on without this worker.
      store_lost_ = true;
      detail::abort_default_group(detail::generation(), "worker " + std::to_string(me_.id) + " lost the job's store");
      return;
    }
    std::unique_lock<std::mutex> lock(stop_mutex_);
    stop_.wait_for(lock, kWatchEvery, [this] { return stopping_.load(); });
  }
}

// The count of joiners that ever came, against the count admitted (read again only when
// more came than were last admitted).
void Membership::watch_joiners(int64_t& admitted) {
  const int64_t came = watch_store_->add(key("joiners/count"), 0);
  if (came > admitted && watch_store_->check({key("joiners/admitted")})) {
    const auto bytes = watch_store_->get(key("joiners/admitted"));
    admitted = std::stoll(text_of(bytes));
  }
  joiner_waiting_ = came > admitted;
}

void Membership::abort_if_a_member_ended(int generation) {
  std::vector<Member> members;
  {
    std::lock_guard<std::mutex> lock(watched_mutex_);
    if (watched_generation_ != generation) return;  // the group is not formed yet, or left
    members = watched_members_;
  }
  for (const Member& m : members) {
    if (m == me_ || !watch_store_->check({ended_key(attempt_, m)})) continue;
    detail::abort_default_group(generation, "worker " + std::to_string(m.id) + " ended, or its node stopped answering");
    return;
  }
}

}  // namespace lockstep::elastic
