#pragma once

// HTTP(S) requests with libcurl for the sources and stores that live behind URLs (shard
// folders over HTTP(S), S3): TLS verified, a bounded pool of connections kept open between
// requests, transient failures retried, and a GET cut short continued where it stopped.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lockstep::net {

/// What a request carries besides its URL.
struct HttpRequest {
  std::string method = "GET";
  /// "Name: value" lines. With sigv4 every one is signed.
  std::vector<std::string> headers;
  /// What a PUT or POST sends; not owned.
  const uint8_t* body = nullptr;
  size_t body_bytes = 0;
  /// libcurl's AWS Signature Version 4 ("aws:amz:REGION:s3"), with user_password as
  /// "ACCESS_KEY:SECRET"; empty for none.
  std::string sigv4;
  std::string user_password;
  bool follow_redirects = true;
  /// Where a GET's 2xx body goes as it arrives, piece by piece and in order, instead of
  /// into HttpResponse::body, so that a reader can use the start of a large file before the
  /// rest is here. A try that continues a cut body gives only the bytes not given before.
  /// Returning false stops the transfer (HttpResponse::stopped).
  std::function<bool(const uint8_t*, size_t)> on_body;
};

struct HttpResponse {
  long status = 0;
  /// The body: the file for a 2xx, the server's error document otherwise.
  std::vector<uint8_t> body;
  /// Response headers, names in lower case ("etag: ..."), as received.
  std::vector<std::string> headers;
  /// The value of header `name` (lower case), or "".
  std::string header(const std::string& name) const;
  /// How many tries it took, and how long in all: a 5xx after several was given up on.
  int tries = 1;
  double seconds = 0;
  /// Body bytes given to HttpRequest::on_body, and whether it stopped the transfer.
  size_t streamed = 0;
  bool stopped = false;
};

/// " (gave up after N tries in S s)", for a message about a request that was retried.
std::string gave_up(const HttpResponse& response);

struct HttpOptions {
  std::string ca_file;  // a certificate authority to trust besides the system's
  double timeout = 30;  // seconds without progress before a try is given up
  int connections = 4;  // open at most, reused between requests
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// One request, tried again while it fails in a way another try may not (a reset, a
  /// stall, 429, 5xx) for at most 4 x timeout in all, with backoff; a GET whose body was
  /// cut short asks for the rest with a Range request. Returns the last response, whatever
  /// its status. Throws DataError naming `shown` (the URL as the user knows it) when no
  /// answer came at all. Safe to call from several threads at once.
  HttpResponse perform(const std::string& url, const HttpRequest& request, const std::string& shown) const;

  const HttpOptions& options() const { return options_; }

 private:
  struct Pool;
  HttpOptions options_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace lockstep::net
