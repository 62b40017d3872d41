#pragma once

#include <string>

#include <gtest/gtest.h>

#include "lockstep/error.h"

namespace lockstep::testing {

/// The message of the DataError that `action` throws; a test failure (and "") when it
/// throws none.
template <typename Action>
std::string data_error(Action action) {
  try {
    action();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

}  // namespace lockstep::testing
