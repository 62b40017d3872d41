#include "net/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "lockstep/error.h"

namespace lockstep::net {
namespace {

using Clock = std::chrono::steady_clock;

void initialize_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Failures of the network that another try may not meet; others (a certificate that is
// not trusted, a malformed URL) would fail the same way again.
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

// 429 and 5xx are the server's trouble, maybe passing (S3's SlowDown is a 503); other
// statuses are the request's.
bool retryable_status(long status) { return status == 429 || status >= 500; }

// What one try ended with.
struct Attempt {
  bool answered = false;   // a whole response arrived (any status)
  bool retryable = false;  // worth another try
  std::string failure;     // why it did not answer, for the message
};

// Where a transfer's bytes go: to the request's on_body for a 2xx when it has one, else
// straight into the body, sized once from Content-Length so that a shard is not copied
// again after it arrived.
struct Transfer {
  CURL* handle;
  const HttpRequest* request;
  HttpResponse* response;
  size_t had;  // body bytes from earlier tries, asked for with a Range
  bool started = false;
  bool streaming = false;
  size_t skip = 0;  // bytes that a server ignoring the Range sends again
};

size_t take_body(char* data, size_t size, size_t count, void* transfer_in) {
  auto& transfer = *static_cast<Transfer*>(transfer_in);
  HttpResponse& response = *transfer.response;
  if (!transfer.started) {
    transfer.started = true;
    long status = 0;
    curl_easy_getinfo(transfer.handle, CURLINFO_RESPONSE_CODE, &status);
    transfer.streaming = transfer.request->on_body && status / 100 == 2;
    if (transfer.had > 0 && status == 200) transfer.skip = transfer.had;
    if (status / 100 != 2) response.body.clear();  // an error document, alone
    curl_off_t length = -1;
    curl_easy_getinfo(transfer.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (!transfer.streaming && length > 0) response.body.reserve(response.body.size() + static_cast<size_t>(length));
  }
  const size_t total = size * count;
  const size_t skipped = std::min(total, transfer.skip);
  transfer.skip -= skipped;
  const auto* piece = reinterpret_cast<const uint8_t*>(data) + skipped;
  const size_t bytes = total - skipped;
  if (!transfer.streaming) {
    response.body.insert(response.body.end(), piece, piece + bytes);
  } else if (bytes > 0) {
    if (!transfer.request->on_body(piece, bytes)) {
      response.stopped = true;
      return 0;  // anything but `total` ends the transfer
    }
    response.streamed += bytes;
  }
  return total;
}

size_t append_header(char* data, size_t size, size_t count, void* response_in) {
  auto& response = *static_cast<HttpResponse*>(response_in);
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) response.headers.clear();  // a new response (after a 100 Continue)
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::transform(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(colon), line.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    response.headers.push_back(line);
  }
  return size * count;
}

// What a PUT or POST sends, read by libcurl in pieces.
struct Upload {
  const uint8_t* data;
  size_t left;
};

size_t read_body(char* into, size_t size, size_t count, void* upload_in) {
  auto& upload = *static_cast<Upload*>(upload_in);
  const size_t n = std::min(size * count, upload.left);
  std::copy(upload.data, upload.data + n, into);
  upload.data += n;
  upload.left -= n;
  return n;
}

}  // namespace

std::string gave_up(const HttpResponse& response) {
  return " (gave up after " + std::to_string(response.tries) + " tries in " +
         std::to_string(static_cast<int>(response.seconds + 0.5)) + " s)";
}

std::string HttpResponse::header(const std::string& name) const {
  const std::string prefix = name + ":";
  for (const auto& line : headers) {
    if (line.rfind(prefix, 0) != 0) continue;
    size_t start = prefix.size();
    while (start < line.size() && line[start] == ' ') ++start;
    return line.substr(start);
  }
  return "";
}

// libcurl handles, each keeping its connections open, lent to one request at a time.
struct HttpClient::Pool {
  std::mutex mutex;
  std::condition_variable returned;
  std::vector<CURL*> idle;
  int created = 0;

  // A handle, waiting while all `connections` are in use.
  CURL* borrow(int connections, const std::string& shown) {
    std::unique_lock<std::mutex> lock(mutex);
    returned.wait(lock, [&] { return !idle.empty() || created < connections; });
    if (!idle.empty()) {
      CURL* handle = idle.back();
      idle.pop_back();
      return handle;
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw DataError("cannot reach " + shown + ": libcurl could not make a handle");
    ++created;
    return handle;
  }

  void give_back(CURL* handle) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      idle.push_back(handle);
    }
    returned.notify_one();
  }
};

namespace {

// One try. A GET whose `response` already holds the start of the body (a try cut short)
// asks only for the rest, with a Range request.
Attempt try_once(CURL* handle, const std::string& url, const HttpRequest& request, const HttpOptions& options,
                 HttpResponse& response) {
  const bool get = request.method == "GET";
  // Streamed bytes are never given twice, whatever the last try's status; a body kept here
  // is continued only after a 2xx (else it is an error document).
  const size_t kept = get && response.status / 100 == 2 ? response.body.size() : 0;
  response.body.resize(kept);
  const size_t had = get ? kept + response.streamed : 0;
  Transfer transfer{handle, &request, &response, had};
  Upload upload{request.body, request.body_bytes};
  char error[CURL_ERROR_SIZE] = "";
  const long stall = std::max(1L, static_cast<long>(options.timeout + 0.5));
  curl_slist* headers = nullptr;
  for (const auto& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  curl_easy_reset(handle);  // keeps the handle's open connections
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, take_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, append_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, stall);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);    // bytes per second...
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, stall);  // ...for this long: a stall
  if (!options.ca_file.empty()) curl_easy_setopt(handle, CURLOPT_CAINFO, options.ca_file.c_str());
  if (headers != nullptr) curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  if (!request.sigv4.empty()) {
    curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, request.sigv4.c_str());
    curl_easy_setopt(handle, CURLOPT_USERPWD, request.user_password.c_str());
  }
  if (request.method == "PUT" || request.method == "POST") {
    curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    if (request.method == "POST") curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "POST");
    curl_easy_setopt(handle, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(handle, CURLOPT_READDATA, &upload);
    curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body_bytes));
  } else if (!get) {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (request.method == "HEAD") curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
  }
  const std::string range = std::to_string(had) + "-";
  if (had > 0) curl_easy_setopt(handle, CURLOPT_RANGE, range.c_str());

  const CURLcode code = curl_easy_perform(handle);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  response.status = had > 0 && status == 206 ? 200 : status;
  if (code == CURLE_OK || response.stopped) return {true, !response.stopped && retryable_status(status), ""};
  std::string failure = curl_easy_strerror(code);
  if (error[0] != '\0') failure += " (" + std::string(error) + ")";
  if (code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE) {
    failure += "; trust the server's certificate authority with ca_file in the registry entry";
  }
  if (response.status / 100 != 2) response.body.clear();  // part of an error document
  return {false, transient(code), failure};
}

}  // namespace

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)), pool_(std::make_unique<Pool>()) {
  initialize_curl_once();
  if (options_.connections < 1) throw ConfigError("ShardOptions::connections must be at least 1");
}

HttpClient::~HttpClient() {
  for (CURL* handle : pool_->idle) curl_easy_cleanup(handle);
}

HttpResponse HttpClient::perform(const std::string& url, const HttpRequest& request, const std::string& shown) const {
  CURL* handle = pool_->borrow(options_.connections, shown);
  const auto give_back = [&] { pool_->give_back(handle); };
  HttpResponse response;
  const auto started = Clock::now();
  const auto budget = std::chrono::duration<double>(4 * options_.timeout);
  auto pause = std::chrono::milliseconds(100);
  try {
    for (int tries = 1;; ++tries) {
      const Attempt attempt = try_once(handle, url, request, options_, response);
      const bool out_of_time = Clock::now() + pause - started > budget;
      response.tries = tries;
      response.seconds = std::chrono::duration<double>(Clock::now() - started).count();
      if (attempt.answered && (!attempt.retryable || out_of_time)) {
        give_back();
        return response;
      }
      if (!attempt.answered && !attempt.retryable) throw DataError("cannot read " + shown + ": " + attempt.failure);
      if (out_of_time) throw DataError("cannot read " + shown + ": " + attempt.failure + gave_up(response));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(5000));
    }
  } catch (...) {
    give_back();
    throw;
  }
}

}  // namespace lockstep::net
