#include "job/quiet_c10d.h"

#include <c10/util/Logging.h>

namespace lockstep {
namespace {

constexpr int kFatalOnly = 3;

}  // namespace

QuietC10dLogs::QuietC10dLogs() : saved_level_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = kFatalOnly; }

QuietC10dLogs::~QuietC10dLogs() { FLAGS_caffe2_log_level = saved_level_; }

std::string c10d_reason(const std::string& message) {
  const std::size_t errno_start = message.find("(errno: ");
  const std::size_t reason_start = message.find(" - ", errno_start);
  const std::size_t reason_end = message.find(')', reason_start);
  if (errno_start == std::string::npos || reason_start == std::string::npos || reason_end == std::string::npos) {
    return message.substr(0, message.find('\n'));
  }
  return message.substr(reason_start + 3, reason_end - reason_start - 3);
}

}  // namespace lockstep
