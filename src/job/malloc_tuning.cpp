#include "job/malloc_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace lockstep {
namespace {

// LOCKSTEP_MALLOC_TUNING=0 in this process's environment: leave glibc's defaults.
bool malloc_tuning_refused() {
  const char* value = std::getenv("LOCKSTEP_MALLOC_TUNING");
  return value != nullptr && std::strcmp(value, "0") == 0;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& malloc_tuning_environment() {
  static const std::vector<std::pair<std::string, std::string>> settings = {
      {"MALLOC_MMAP_THRESHOLD_", "4294967296"},
      {"MALLOC_TRIM_THRESHOLD_", "4294967296"},
      {"MALLOC_TOP_PAD_", "268435456"},
  };
  return settings;
}

bool chooses_allocator(const std::string& entry) {
  const size_t equals = entry.find('=');
  if (equals == std::string::npos) return false;
  const std::string name = entry.substr(0, equals), value = entry.substr(equals + 1);
  if (name.rfind("MALLOC_", 0) == 0 && name.back() == '_') return true;
  if (name == "GLIBC_TUNABLES") return value.find("glibc.malloc.") != std::string::npos;
  return name == "LD_PRELOAD" && !value.empty();
}

bool tune_malloc_here() {
  if (malloc_tuning_refused()) return false;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (chooses_allocator(*entry)) return false;
  }
  for (const auto& [name, value] : malloc_tuning_environment()) setenv(name.c_str(), value.c_str(), 0);
  // glibc read its variables when this process started; mallopt() takes an int, so this
  // process's thresholds stop at INT_MAX (2 GiB).
  mallopt(M_MMAP_THRESHOLD, INT_MAX);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 256 << 20);
  return true;
}

bool malloc_tuned() {
  for (const auto& [name, value] : malloc_tuning_environment()) {
    const char* set = std::getenv(name.c_str());
    if (set == nullptr || value != set) return false;
  }
  return true;
}

}  // namespace lockstep
