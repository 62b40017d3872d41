#pragma once

#include <exception>
#include <string>

#include "comm/calls/call.h"
#include "comm/transports/stream_marks.h"
#include "comm/world/environment.h"

// Who watches this process's collectives and its ranks joining and leaving: the timeline,
// which registers itself when the library loads (timeline/comm_observer.cpp). comm knows
// no more of it than this.
namespace lockstep::detail {

/// One collective that ran, as its group's Communicator saw it; times on the observer's clock.
struct CallSeen {
  const Call& call;
  int world_rank;            // the member's rank in the default group
  const std::string& group;  // the group's name
  std::string transport;
  double queued_us, started_us, ended_us;
  const std::exception* error;  // null: it succeeded
  // Where its work ran on a device stream (CUDA), when it was timed there: the host's
  // started_us and ended_us say only when it was queued.
  StreamSpan on_device = {};
};

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  /// Whether it wants calls now: a relaxed atomic load, asked before each call.
  virtual bool watching() const = 0;
  /// Its clock, in microseconds, as `world_rank` reads it.
  virtual double now_us(int world_rank) const = 0;
  virtual void call_ended(const CallSeen& call) = 0;
  /// This process's rank (or this thread's replica) joined its world, made from `spec`:
  /// after init().
  virtual void joined(const WorldSpec& spec) = 0;
  /// It is about to leave: at shutdown(), or as a replica's body returns.
  virtual void leaving() = 0;
};

/// The process's one observer; null while none registered.
CallObserver* call_observer();
void set_call_observer(CallObserver* observer);

}  // namespace lockstep::detail
