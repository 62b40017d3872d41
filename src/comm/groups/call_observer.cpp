#include "comm/groups/call_observer.h"

#include <atomic>

namespace lockstep::detail {
namespace {

std::atomic<CallObserver*>& registered() {
  static std::atomic<CallObserver*> observer{nullptr};
  return observer;
}

}  // namespace

CallObserver* call_observer() { return registered().load(std::memory_order_acquire); }

void set_call_observer(CallObserver* observer) { registered().store(observer, std::memory_order_release); }

}  // namespace lockstep::detail
