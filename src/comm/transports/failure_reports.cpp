#include "comm/transports/failure_reports.h"

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>

#include <gloo/rendezvous/store.h>

#include "lockstep/error.h"

namespace lockstep {
namespace {

// How long to wait for the other ranks' reports after a failure: they fail at about the
// same moment when they disagreed, and never report when they died.
constexpr std::chrono::milliseconds kReportGrace{2000};

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << value;
  return out.str();
}

}  // namespace

FailureReports::FailureReports(std::shared_ptr<gloo::rendezvous::Store> store, int rank, int size,
                               std::vector<int> group_ranks)
    : store_(std::move(store)), rank_(rank), size_(size), group_ranks_(std::move(group_ranks)) {}

int FailureReports::named(int rank) const { return group_ranks_.empty() ? rank : group_ranks_.at(rank); }

std::exception_ptr FailureReports::explain(const Call& call, const std::exception& failure,
                                           std::chrono::steady_clock::duration elapsed,
                                           std::chrono::milliseconds timeout) const {
  // The report starts with the call's fingerprint, so that differing calls are told apart.
  const std::string mine = hex(call.fingerprint()) + call.describe();
  const std::string key = "failure-";  // one per rank: a group fails only once
  try {
    store_->set(key + std::to_string(rank_), std::vector<char>(mine.begin(), mine.end()));
  } catch (const std::exception&) {
  }
  const auto deadline = std::chrono::steady_clock::now() + std::min(kReportGrace, timeout);
  std::ostringstream others;
  bool disagree = false;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    others << "\n  rank " << named(r) << ": ";
    try {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      store_->wait({key + std::to_string(r)}, std::max(left, std::chrono::milliseconds(1)));
      const auto report = store_->get(key + std::to_string(r));
      const std::string theirs(report.begin(), report.end());
      disagree = disagree || theirs.compare(0, 16, mine, 0, 16) != 0;
      others << "failed in " << theirs.substr(16);
    } catch (const std::exception&) {
      others << "no report (it died, is stuck outside lockstep, or is not at collective #" << call.seq << ")";
    }
  }
  const auto seconds = std::chrono::duration<double>(elapsed).count();
  std::ostringstream message;
  message << "lockstep: rank " << named(rank_) << ": " << call.describe() << " failed after " << std::fixed
          << std::setprecision(1) << seconds << " s: " << failure.what() << others.str();
  if (disagree) {
    message << "\nranks called different collectives; every rank must pass the same shapes, "
               "dtypes, ops and roots, in the same order";
    return std::make_exception_ptr(MismatchError(message.str()));
  }
  if (elapsed >= timeout) return std::make_exception_ptr(TimeoutError(message.str()));
  return std::make_exception_ptr(Error(message.str()));
}

}  // namespace lockstep
