// Shard folders behind http:// and https:// URLs, read with libcurl: TLS verified, a bounded
// pool of connections kept open between reads, and transient failures retried.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "data/sources/byte_source.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

using Clock = std::chrono::steady_clock;

void initialize_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What one transfer ended with.
struct Attempt {
  bool done = false;       // the whole body is in hand
  bool retryable = false;  // worth another try (a reset, a stall, a 5xx)
  std::string failure;     // why it is not done, for the message
};

// Failures of the network that another try may not meet; others (a 404, a certificate
// that is not trusted, a malformed URL) would fail the same way again.
bool transient(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
  }
}

// Where a transfer's bytes go: straight into the body, sized once from Content-Length, so
// that a shard is not copied again after it arrived.
struct Transfer {
  CURL* handle;
  std::vector<uint8_t>* body;
  bool sized = false;
};

size_t append_body(char* data, size_t size, size_t count, void* transfer_in) {
  auto& transfer = *static_cast<Transfer*>(transfer_in);
  if (!transfer.sized) {
    curl_off_t length = -1;
    curl_easy_getinfo(transfer.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (length > 0) transfer.body->reserve(transfer.body->size() + static_cast<size_t>(length));
    transfer.sized = true;
  }
  transfer.body->insert(transfer.body->end(), data, data + size * count);
  return size * count;
}

class HttpFolder : public ByteSource {
 public:
  HttpFolder(std::string url, const ShardOptions& options) : url_(std::move(url)), options_(options) {
    initialize_curl_once();
    if (options_.connections() < 1) throw ConfigError("ShardOptions::connections must be at least 1");
  }

  ~HttpFolder() override {
    for (CURL* handle : idle_) curl_easy_cleanup(handle);
  }

  std::vector<uint8_t> read(const std::string& name) const override {
    const std::string url = locate(name);
    CURL* handle = borrow();
    std::vector<uint8_t> body;
    const auto started = Clock::now();
    const auto budget = std::chrono::duration<double>(4 * options_.timeout());
    auto pause = std::chrono::milliseconds(100);
    try {
      for (int tries = 1;; ++tries) {
        const Attempt attempt = fetch(handle, url, body);
        if (attempt.done) {
          give_back(handle);
          return body;
        }
        if (!attempt.retryable) throw DataError("cannot read " + url + ": " + attempt.failure);
        if (Clock::now() + pause - started > budget) {
          const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
          throw DataError("cannot read " + url + ": " + attempt.failure + " (gave up after " + std::to_string(tries) +
                          " tries in " + std::to_string(static_cast<int>(seconds + 0.5)) + " s)");
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(5000));
      }
    } catch (...) {
      give_back(handle);
      throw;
    }
  }

  std::string locate(const std::string& name) const override { return url_ + "/" + name; }

 private:
  // One GET; when `body` already holds the start of the file (a transfer cut short), only
  // the rest is asked for, with a Range request.
  Attempt fetch(CURL* handle, const std::string& url, std::vector<uint8_t>& body) const {
    const size_t had = body.size();
    Transfer transfer{handle, &body};
    char error[CURL_ERROR_SIZE] = "";
    const long stall = std::max(1L, static_cast<long>(options_.timeout() + 0.5));
    curl_easy_reset(handle);  // keeps the handle's open connections
    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, stall);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);    // bytes per second...
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, stall);  // ...for this long: a stall
    if (!options_.ca_file().empty()) curl_easy_setopt(handle, CURLOPT_CAINFO, options_.ca_file().c_str());
    const std::string range = std::to_string(body.size()) + "-";
    if (!body.empty()) curl_easy_setopt(handle, CURLOPT_RANGE, range.c_str());

    const CURLcode code = curl_easy_perform(handle);
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    const bool whole = status == 200;
    const bool rest = status == 206 && had > 0;
    if (whole && had > 0) {
      // A server that ignores the Range sends the whole file again.
      body.erase(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(had));
    } else if (!whole && !rest) {
      body.resize(had);  // an error page, not the file
    }
    if ((whole || rest) && code == CURLE_OK) return {true, false, ""};
    if (code != CURLE_OK) {
      std::string failure = curl_easy_strerror(code);
      if (error[0] != '\0') failure += " (" + std::string(error) + ")";
      if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE) {
        failure += "; trust the server's certificate authority with ca_file in the registry entry";
      }
      return {false, transient(code), failure};
    }
    // 429 and 5xx are the server's trouble, maybe passing; other statuses are the request's.
    return {false, status == 429 || status >= 500, "HTTP " + std::to_string(status)};
  }

  // A handle of the pool, waiting while all `connections` are in use.
  CURL* borrow() const {
    std::unique_lock<std::mutex> lock(mutex_);
    returned_.wait(lock, [&] { return !idle_.empty() || created_ < options_.connections(); });
    if (!idle_.empty()) {
      CURL* handle = idle_.back();
      idle_.pop_back();
      return handle;
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw DataError("cannot read " + url_ + ": libcurl could not make a handle");
    ++created_;
    return handle;
  }

  void give_back(CURL* handle) const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(handle);
    }
    returned_.notify_one();
  }

  std::string url_;
  ShardOptions options_;
  mutable std::mutex mutex_;
  mutable std::condition_variable returned_;
  mutable std::vector<CURL*> idle_;
  mutable int created_ = 0;
};

}  // namespace

std::shared_ptr<ByteSource> open_http_source(const std::string& url, const ShardOptions& options) {
  return std::make_shared<HttpFolder>(url, options);
}

}  // namespace lockstep::data
