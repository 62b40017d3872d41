#include "s3/s3_responses.h"

#include "lockstep/error.h"

namespace lockstep::s3 {
namespace {

std::string decoded(std::string text) {
  static const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [entity, character] : entities) {
    for (size_t at = text.find(entity); at != std::string::npos; at = text.find(entity, at + 1)) {
      text.replace(at, std::string(entity).size(), character);
    }
  }
  return text;
}

}  // namespace

std::string xml_field(const std::string& xml, const std::string& name, size_t from) {
  const std::string open = "<" + name + ">", close = "</" + name + ">";
  const size_t start = xml.find(open, from);
  if (start == std::string::npos) return "";
  const size_t end = xml.find(close, start);
  if (end == std::string::npos) return "";
  return decoded(xml.substr(start + open.size(), end - start - open.size()));
}

std::string explain_error(const net::HttpResponse& response, const S3Url& object, const std::string& where) {
  const std::string xml(response.body.begin(), response.body.end());
  const std::string code = xml_field(xml, "Code");
  const std::string message = xml_field(xml, "Message");
  const std::string status = "HTTP " + std::to_string(response.status);
  std::string said = code.empty() ? status : "S3 said " + code + " (" + status + ")";
  const std::string bucket = "bucket '" + object.bucket + "'";
  std::string region = response.header("x-amz-bucket-region");
  if (region.empty()) region = xml_field(xml, "Region");
  if (response.status == 301 || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed") {
    said += ": " + bucket + " is not where " + where + " looked";
    if (!region.empty()) said += "; it is in region " + region + ": set region = \"" + region + "\" or AWS_REGION";
  } else if (code == "NoSuchBucket") {
    said += ": there is no " + bucket + " at " + where;
  } else if (code == "NoSuchKey" || (code.empty() && response.status == 404)) {
    said += ": no object '" + object.key + "' in " + bucket;
  } else {
    said += " for " + bucket + (object.key.empty() ? "" : ", key '" + object.key + "'");
    if (!message.empty()) said += ": " + message;
  }
  if (response.status == 429 || response.status >= 500) said += net::gave_up(response);
  return said;
}

std::string credentials_note(const Credentials& credentials, const std::string& code) {
  const std::string note = "; credentials from " + credentials.source;
  if (credentials.session_token.empty()) return note;
  if (code == "ExpiredToken") return note + ": their session token has expired; get new credentials";
  if (code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "InvalidToken") {
    return note + ", with a session token: if it has expired, get new credentials";
  }
  return note;
}

ListPage parse_list_page(const std::vector<uint8_t>& body) {
  const std::string xml(body.begin(), body.end());
  if (xml.find("<ListBucketResult") == std::string::npos) {
    throw DataError("S3 answered a listing with something else: " + xml.substr(0, 200));
  }
  ListPage page;
  for (size_t at = xml.find("<Contents>"); at != std::string::npos; at = xml.find("<Contents>", at + 1)) {
    const size_t end = xml.find("</Contents>", at);
    const std::string entry = xml.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::string size = xml_field(entry, "Size");
    page.objects.push_back({xml_field(entry, "Key"), size.empty() ? 0 : std::stoull(size)});
  }
  if (xml_field(xml, "IsTruncated") == "true") page.next_continuation = xml_field(xml, "NextContinuationToken");
  return page;
}

}  // namespace lockstep::s3
