// Shard folders in S3 buckets (s3/s3_client.h signs and sends the requests).
#include "data/sources/byte_source.h"
#include "s3/s3_client.h"

namespace lockstep::data {
namespace {

s3::S3Settings settings_of(const ShardOptions& options) {
  s3::S3Settings settings;
  settings.endpoint = options.endpoint();
  settings.region = options.region();
  settings.addressing = options.addressing();
  settings.ca_file = options.ca_file();
  settings.timeout = options.timeout();
  settings.connections = options.connections();
  return settings;
}

class S3Folder : public ByteSource {
 public:
  S3Folder(const std::string& url, const ShardOptions& options)
      : prefix_(s3::parse_s3_url(url)), client_(settings_of(options)) {}

  std::vector<uint8_t> read(const std::string& name) const override { return client_.get(prefix_.child(name)); }

  bool stream(const std::string& name, const Arrived& arrived) const override {
    return client_.stream(prefix_.child(name), arrived);
  }

  std::string locate(const std::string& name) const override { return prefix_.child(name).str(); }

 private:
  s3::S3Url prefix_;
  s3::S3Client client_;
};

}  // namespace

std::shared_ptr<ByteSource> open_s3_source(const std::string& url, const ShardOptions& options) {
  return std::make_shared<S3Folder>(url, options);
}

}  // namespace lockstep::data
