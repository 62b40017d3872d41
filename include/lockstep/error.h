#pragma once

#include <stdexcept>

namespace lockstep {

/// Every error lockstep raises, in every part of it (collectives, DDP, data, training,
/// launching). Messages name what to fix: rank, shape, variable, file.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad or conflicting configuration: environment variables, InitOptions, store paths.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A rendezvous or collective did not finish within the timeout (a rank died or never came).
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// Ranks called the same collective with different shapes, dtypes, ops or roots.
class MismatchError : public Error {
 public:
  using Error::Error;
};

/// Input data that cannot be read: a missing, truncated or corrupt file, a bad CSV row, an
/// empty dataset. The message names the file (and the line, for text files).
class DataError : public Error {
 public:
  using Error::Error;
};

}  // namespace lockstep
