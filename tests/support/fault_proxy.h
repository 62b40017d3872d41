#pragma once

#include <string>

#include "support/loopback_server.h"

namespace lockstep::testing {

/// What a FaultProxy does to the requests it spoils.
enum class Fault {
  kCloseMidBody,               // sends the response head and half the body, then closes the connection
  kCloseMidBodyIgnoringRange,  // the same, and then answers as a server that ignores Range
  kAnswer503,                  // answers 503 Service Unavailable (with S3's SlowDown body) without asking the server
  kStall,                      // reads the request and never answers
};

/// An HTTP proxy on 127.0.0.1 in front of a real server (nginx, the S3 gateway, on
/// `upstream_port`) that spoils the first `spoiled` requests with `fault` and passes the
/// others through, one request per connection and without bodies (GETs). For the faults a
/// client meets on real networks.
class FaultProxy {
 public:
  FaultProxy(int upstream_port, Fault fault, int spoiled);

  int port() const { return server_.port(); }
  std::string url() const { return server_.url(); }
  /// Requests received so far, spoiled or not.
  int requests() const { return server_.requests(); }
  /// Requests so far whose head contains `part`, e.g. a file's name.
  int requests_with(const std::string& part) const { return server_.requests_with(part); }

 private:
  void answer(int client, const std::string& head, int number);

  int upstream_port_;
  Fault fault_;
  int spoiled_;
  LoopbackServer server_;  // last: its threads use the members above
};

}  // namespace lockstep::testing
