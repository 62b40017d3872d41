#include "s3/s3_url.h"

#include <cctype>

#include "lockstep/error.h"

namespace lockstep::s3 {
namespace {

bool valid_bucket(const std::string& name) {
  if (name.size() < 3 || name.size() > 63) return false;
  const auto letter_or_digit = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  if (!letter_or_digit(name.front()) || !letter_or_digit(name.back())) return false;
  for (char c : name) {
    if (!letter_or_digit(c) && c != '.' && c != '-') return false;
  }
  return true;
}

}  // namespace

bool is_s3_url(const std::string& text) { return text.rfind("s3://", 0) == 0; }

S3Url parse_s3_url(const std::string& text) {
  if (!is_s3_url(text)) throw ConfigError(text + ": not an s3:// URL");
  const std::string rest = text.substr(5);
  const size_t slash = rest.find('/');
  S3Url url{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  while (!url.key.empty() && url.key.back() == '/') url.key.pop_back();
  if (!valid_bucket(url.bucket)) {
    throw ConfigError(text + ": '" + url.bucket +
                      "' is not a bucket name S3 allows (3 to 63 lower-case letters, digits, '.' and '-', "
                      "starting and ending with a letter or digit)");
  }
  return url;
}

std::string uri_encode(const std::string& text, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace lockstep::s3
