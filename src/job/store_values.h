#pragma once

#include <cstdint>
#include <string>
#include <vector>

// A store keeps bytes; lockstep's keys hold text.
namespace lockstep {

inline std::vector<uint8_t> bytes_of(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }
inline std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace lockstep
