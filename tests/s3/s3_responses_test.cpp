// S3's answers read: error documents into one line a user can act on, and listing pages.
#include <gtest/gtest.h>

#include "s3/s3_responses.h"

namespace lockstep::s3 {
namespace {

net::HttpResponse answer(long status, const std::string& xml, std::vector<std::string> headers = {}) {
  net::HttpResponse response;
  response.status = status;
  response.body.assign(xml.begin(), xml.end());
  response.headers = std::move(headers);
  return response;
}

const S3Url kObject{"bucket", "data/train.index.json"};
const std::string kWhere = "http://127.0.0.1:9000 (region us-east-1, path-style)";

TEST(S3Responses, EachErrorNamesWhatToFix) {
  EXPECT_EQ(explain_error(answer(404, "<Error><Code>NoSuchKey</Code><Message></Message></Error>"), kObject, kWhere),
            "S3 said NoSuchKey (HTTP 404): no object 'data/train.index.json' in bucket 'bucket'");
  EXPECT_EQ(explain_error(answer(404, "<Error><Code>NoSuchBucket</Code></Error>"), kObject, kWhere),
            "S3 said NoSuchBucket (HTTP 404): there is no bucket 'bucket' at " + kWhere);
  EXPECT_EQ(explain_error(answer(403, "<Error><Code>SignatureDoesNotMatch</Code><Message></Message></Error>"), kObject,
                          kWhere),
            "S3 said SignatureDoesNotMatch (HTTP 403) for bucket 'bucket', key 'data/train.index.json'");
  EXPECT_EQ(
      explain_error(answer(301, "<Error><Code>PermanentRedirect</Code></Error>", {"x-amz-bucket-region: eu-west-1"}),
                    kObject, kWhere),
      "S3 said PermanentRedirect (HTTP 301): bucket 'bucket' is not where " + kWhere +
          " looked; it is in region eu-west-1: set region = \"eu-west-1\" or AWS_REGION");
  net::HttpResponse slow =
      answer(503, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>");
  slow.tries = 9;
  slow.seconds = 119.6;
  EXPECT_EQ(explain_error(slow, kObject, kWhere),
            "S3 said SlowDown (HTTP 503) for bucket 'bucket', key 'data/train.index.json': Please reduce your request "
            "rate. (gave up after 9 tries in 120 s)");
  EXPECT_EQ(explain_error(answer(404, ""), kObject, kWhere),
            "HTTP 404: no object 'data/train.index.json' in bucket 'bucket'");
}

TEST(S3Responses, ARefusalWithASessionTokenSaysItMayHaveExpired) {
  Credentials keys{"AKID", "secret", "", "the environment (AWS_ACCESS_KEY_ID)", std::nullopt};
  EXPECT_EQ(credentials_note(keys, "AccessDenied"), "; credentials from the environment (AWS_ACCESS_KEY_ID)");
  Credentials session = keys;
  session.session_token = "token";
  EXPECT_EQ(credentials_note(session, "ExpiredToken"),
            "; credentials from the environment (AWS_ACCESS_KEY_ID): their session token has expired; get new "
            "credentials");
  EXPECT_EQ(credentials_note(session, "AccessDenied"),
            "; credentials from the environment (AWS_ACCESS_KEY_ID), with a session token: if it has expired, get new "
            "credentials");
  EXPECT_EQ(credentials_note(session, "InvalidAccessKeyId"),
            "; credentials from the environment (AWS_ACCESS_KEY_ID), with a session token: if it has expired, get new "
            "credentials");
  EXPECT_EQ(credentials_note(session, "NoSuchKey"), "; credentials from the environment (AWS_ACCESS_KEY_ID)");
}

TEST(S3Responses, AListingPageGivesKeysSizesAndTheNextToken) {
  const std::string xml =
      "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><IsTruncated>true</IsTruncated>"
      "<Contents><Key>runs/a&amp;b.pt</Key><Size>12</Size></Contents>"
      "<Contents><Key>runs/c.pt</Key><Size>3</Size></Contents>"
      "<NextContinuationToken>tok/en=</NextContinuationToken></ListBucketResult>";
  const ListPage page = parse_list_page(std::vector<uint8_t>(xml.begin(), xml.end()));
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "runs/a&b.pt");
  EXPECT_EQ(page.objects[0].size, 12u);
  EXPECT_EQ(page.objects[1].key, "runs/c.pt");
  EXPECT_EQ(page.next_continuation, "tok/en=");
}

}  // namespace
}  // namespace lockstep::s3
