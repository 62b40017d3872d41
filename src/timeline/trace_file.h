#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::timeline::detail {

/// A timeline file's trace events (an array, or an object's "traceEvents"); a file a rank
/// left open is read as if closed. DataError naming the file when it is not a timeline.
nlohmann::json read_trace(const std::string& path);

}  // namespace lockstep::timeline::detail
