// Shard folders behind http:// and https:// URLs (net/http_client.h does the requests).
#include "data/sources/byte_source.h"
#include "lockstep/error.h"
#include "net/http_client.h"

namespace lockstep::data {
namespace {

class HttpFolder : public ByteSource {
 public:
  HttpFolder(std::string url, const ShardOptions& options)
      : url_(std::move(url)), client_(net::HttpOptions{options.ca_file(), options.timeout(), options.connections()}) {}

  std::vector<uint8_t> read(const std::string& name) const override {
    net::HttpResponse response = get(name, net::HttpRequest{});
    return std::move(response.body);
  }

  bool stream(const std::string& name, const Arrived& arrived) const override {
    net::HttpRequest request;
    request.on_body = arrived;
    return !get(name, request).stopped;
  }

  std::string locate(const std::string& name) const override { return url_ + "/" + name; }

 private:
  net::HttpResponse get(const std::string& name, const net::HttpRequest& request) const {
    const std::string url = locate(name);
    net::HttpResponse response = client_.perform(url, request, url);
    if (response.status == 200 || response.stopped) return response;
    const bool retried = response.status == 429 || response.status >= 500;
    throw DataError("cannot read " + url + ": HTTP " + std::to_string(response.status) +
                    (retried ? net::gave_up(response) : ""));
  }

  std::string url_;
  net::HttpClient client_;
};

}  // namespace

std::shared_ptr<ByteSource> open_http_source(const std::string& url, const ShardOptions& options) {
  return std::make_shared<HttpFolder>(url, options);
}

}  // namespace lockstep::data
