#pragma once

// What S3 answers, read: its error documents, turned into one line a user can act on, and
// ListObjectsV2's pages.

#include <cstdint>
#include <string>
#include <vector>

#include "net/http_client.h"
#include "s3/credentials.h"
#include "s3/s3_client.h"

namespace lockstep::s3 {

/// "S3 said CODE (HTTP N): what it means for `object`" from an error response; `where`
/// describes the endpoint and region asked (S3Client::describe).
std::string explain_error(const net::HttpResponse& response, const S3Url& object, const std::string& where);

/// "; credentials from SOURCE", and where they carry a session token that may be why S3
/// refused (`code`), that it may have expired: AWS says ExpiredToken, Ceph's gateway
/// InvalidAccessKeyId or AccessDenied.
std::string credentials_note(const Credentials& credentials, const std::string& code);

struct ListPage {
  std::vector<ObjectInfo> objects;
  std::string next_continuation;  // "" on the last page
};

/// A ListObjectsV2 result; DataError when it is not one.
ListPage parse_list_page(const std::vector<uint8_t>& body);

/// The text of the first <name>...</name> in `xml`, entities decoded; "" when absent.
std::string xml_field(const std::string& xml, const std::string& name, size_t from = 0);

}  // namespace lockstep::s3
