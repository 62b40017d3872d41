#pragma once

// The bytes of a TensorBoard event file, apart from the sink so that tests can check them.
#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep::train::tensorboard {

/// CRC-32C (Castagnoli), the checksum TFRecord framing uses.
uint32_t crc32c(const void* data, size_t size);

/// TFRecord's masked CRC: a CRC stored next to data that itself holds CRCs stays meaningful.
uint32_t masked_crc32c(const void* data, size_t size);

/// One TFRecord: uint64 little-endian length, masked CRC of those 8 bytes, payload, masked
/// CRC of the payload.
std::string tfrecord(const std::string& payload);

/// An Event protocol buffer carrying one scalar summary value.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

/// The Event that opens every event file: file_version "brain.Event:2".
std::string file_version_event(double wall_time);

}  // namespace lockstep::train::tensorboard
