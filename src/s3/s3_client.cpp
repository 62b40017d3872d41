#include "s3/s3_client.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "lockstep/error.h"
#include "s3/s3_responses.h"

namespace lockstep::s3 {
namespace {

std::string scheme_of(const std::string& endpoint) { return endpoint.substr(0, endpoint.find("://") + 3); }
std::string host_of(const std::string& endpoint) { return endpoint.substr(endpoint.find("://") + 3); }

}  // namespace

S3Client::S3Client(S3Settings settings, const Environment& env)
    : settings_(std::move(settings)),
      credentials_(std::make_unique<CredentialChain>(env)),
      http_(net::HttpOptions{settings_.ca_file, settings_.timeout, settings_.connections}) {
  if (settings_.region.empty()) settings_.region = region(env);
  if (settings_.endpoint.empty()) settings_.endpoint = endpoint_url(env);
  while (!settings_.endpoint.empty() && settings_.endpoint.back() == '/') settings_.endpoint.pop_back();
  if (!settings_.endpoint.empty() && settings_.endpoint.find("://") == std::string::npos) {
    throw ConfigError("S3 endpoint '" + settings_.endpoint + "' has no scheme; write http://HOST:PORT or https://HOST");
  }
  const std::string& addressing = settings_.addressing;
  if (!addressing.empty() && addressing != "virtual" && addressing != "path") {
    throw ConfigError("S3 addressing '" + addressing + "' is neither \"virtual\" nor \"path\"");
  }
  path_style_ = addressing.empty() ? !settings_.endpoint.empty() : addressing == "path";
}

std::string S3Client::describe() const {
  const std::string endpoint =
      settings_.endpoint.empty() ? "https://s3." + settings_.region + ".amazonaws.com" : settings_.endpoint;
  return endpoint + " (region " + settings_.region + ", " + (path_style_ ? "path-style" : "virtual-hosted") + ")";
}

std::string S3Client::url_of(const S3Url& object, const std::string& query) const {
  const std::string endpoint =
      settings_.endpoint.empty() ? "https://s3." + settings_.region + ".amazonaws.com" : settings_.endpoint;
  const std::string path = "/" + uri_encode(object.key, /*keep_slash=*/true);
  const std::string after = query.empty() ? "" : "?" + query;
  if (path_style_) return endpoint + "/" + object.bucket + (object.key.empty() ? "" : path) + after;
  return scheme_of(endpoint) + object.bucket + "." + host_of(endpoint) + path + after;
}

net::HttpRequest S3Client::signed_request(const std::string& method) const {
  const Credentials credentials = credentials_->get();
  net::HttpRequest request;
  request.method = method;
  request.sigv4 = "aws:amz:" + settings_.region + ":s3";
  request.user_password = credentials.access_key_id + ":" + credentials.secret_access_key;
  request.follow_redirects = false;  // a redirect is another region: named, not followed
  // libcurl 7.88 neither adds the payload's hash header nor knows session tokens.
  request.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!credentials.session_token.empty())
    request.headers.push_back("x-amz-security-token: " + credentials.session_token);
  return request;
}

void S3Client::fail(const std::string& doing, const S3Url& object, const net::HttpResponse& response) const {
  const std::string code = xml_field(std::string(response.body.begin(), response.body.end()), "Code");
  throw DataError(doing + " " + object.str() + ": " + explain_error(response, object, describe()) +
                  credentials_note(credentials_->get(), code));
}

std::vector<uint8_t> S3Client::get(const S3Url& object) const {
  net::HttpResponse response = http_.perform(url_of(object), signed_request("GET"), object.str());
  if (response.status != 200) fail("cannot read", object, response);
  return std::move(response.body);
}

bool S3Client::stream(const S3Url& object, const std::function<bool(const uint8_t*, size_t)>& arrived) const {
  net::HttpRequest request = signed_request("GET");
  request.on_body = arrived;
  const net::HttpResponse response = http_.perform(url_of(object), request, object.str());
  if (response.stopped) return false;
  if (response.status != 200) fail("cannot read", object, response);
  return true;
}

std::optional<std::vector<uint8_t>> S3Client::get_if_present(const S3Url& object) const {
  net::HttpResponse response = http_.perform(url_of(object), signed_request("GET"), object.str());
  const std::string xml(response.body.begin(), response.body.end());
  if (response.status == 404 && xml_field(xml, "Code") == "NoSuchKey") return std::nullopt;
  if (response.status != 200) fail("cannot read", object, response);
  return std::move(response.body);
}

void S3Client::put(const S3Url& object, const uint8_t* data, size_t bytes) const {
  if (bytes > settings_.multipart_bytes) {
    put_in_parts(object, data, bytes);
    return;
  }
  net::HttpRequest request = signed_request("PUT");
  request.body = data;
  request.body_bytes = bytes;
  const net::HttpResponse response = http_.perform(url_of(object), request, object.str());
  if (response.status != 200) fail("cannot write", object, response);
}

void S3Client::put_in_parts(const S3Url& object, const uint8_t* data, size_t bytes) const {
  const net::HttpResponse started = http_.perform(url_of(object, "uploads="), signed_request("POST"), object.str());
  const std::string upload = xml_field(std::string(started.body.begin(), started.body.end()), "UploadId");
  if (started.status != 200 || upload.empty()) fail("cannot start uploading", object, started);
  const size_t part = std::max<size_t>(settings_.part_bytes, 1);
  const size_t parts = (bytes + part - 1) / part;
  std::vector<std::string> etags(parts);
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failed;
  const auto upload_parts = [&] {
    for (size_t i; (i = next++) < parts;) {
      try {
        etags[i] = put_part(object, upload, i + 1, data + i * part, std::min(part, bytes - i * part));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failed) failed = std::current_exception();
        next = parts;  // no more parts: the upload is aborted below
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min<size_t>(parts, static_cast<size_t>(settings_.connections)); ++t) {
    threads.emplace_back(upload_parts);
  }
  for (auto& thread : threads) thread.join();
  try {
    if (failed) std::rethrow_exception(failed);
    complete_upload(object, upload, etags);
  } catch (...) {
    // Aborted, its parts are dropped: storage is not billed for them, and nothing of the
    // object is visible. The abort's own failure must not hide the upload's.
    try {
      http_.perform(url_of(object, "uploadId=" + uri_encode(upload, false)), signed_request("DELETE"), object.str());
    } catch (const std::exception&) {
    }
    throw;
  }
}

std::string S3Client::put_part(const S3Url& object, const std::string& upload, size_t number, const uint8_t* data,
                               size_t bytes) const {
  net::HttpRequest request = signed_request("PUT");
  request.body = data;
  request.body_bytes = bytes;
  const std::string query = "partNumber=" + std::to_string(number) + "&uploadId=" + uri_encode(upload, false);
  const net::HttpResponse response = http_.perform(url_of(object, query), request, object.str());
  if (response.status != 200 || response.header("etag").empty()) {
    fail("cannot upload part " + std::to_string(number) + " of", object, response);
  }
  return response.header("etag");
}

void S3Client::complete_upload(const S3Url& object, const std::string& upload,
                               const std::vector<std::string>& etags) const {
  std::string parts = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    parts += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] + "</ETag></Part>";
  }
  parts += "</CompleteMultipartUpload>";
  net::HttpRequest request = signed_request("POST");
  request.body = reinterpret_cast<const uint8_t*>(parts.data());
  request.body_bytes = parts.size();
  const net::HttpResponse response =
      http_.perform(url_of(object, "uploadId=" + uri_encode(upload, false)), request, object.str());
  // S3 may answer 200 and still fail the upload in the body it streams.
  const std::string body(response.body.begin(), response.body.end());
  if (response.status != 200 || body.find("<Error>") != std::string::npos) {
    fail("cannot complete the upload of", object, response);
  }
}

void S3Client::remove(const S3Url& object) const {
  const net::HttpResponse response = http_.perform(url_of(object), signed_request("DELETE"), object.str());
  if (response.status != 204 && response.status != 200 && response.status != 404)
    fail("cannot delete", object, response);
}

std::vector<ObjectInfo> S3Client::list(const S3Url& prefix) const {
  std::vector<ObjectInfo> objects;
  const S3Url bucket{prefix.bucket, ""};
  const std::string key_prefix = prefix.key.empty() ? "" : prefix.key + "/";
  std::string continuation;
  do {
    // Parameters in code-point order, encoded: what libcurl signs is what is sent.
    std::string query = continuation.empty() ? "" : "continuation-token=" + uri_encode(continuation, false) + "&";
    query += "list-type=2&prefix=" + uri_encode(key_prefix, false);
    const net::HttpResponse response = http_.perform(url_of(bucket, query), signed_request("GET"), prefix.str());
    if (response.status != 200) fail("cannot list", prefix, response);
    const ListPage page = parse_list_page(response.body);
    objects.insert(objects.end(), page.objects.begin(), page.objects.end());
    continuation = page.next_continuation;
  } while (!continuation.empty());
  std::sort(objects.begin(), objects.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return objects;
}

}  // namespace lockstep::s3
