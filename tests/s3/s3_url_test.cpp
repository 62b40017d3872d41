#include <gtest/gtest.h>

#include "lockstep/error.h"
#include "s3/s3_url.h"

namespace lockstep::s3 {
namespace {

TEST(S3Url, BucketAndKeyWithoutSlashesAtTheEnds) {
  const S3Url url = parse_s3_url("s3://my-bucket.v2/runs/r1/");
  EXPECT_EQ(url.bucket, "my-bucket.v2");
  EXPECT_EQ(url.key, "runs/r1");
  EXPECT_EQ(url.child("step-1.pt").str(), "s3://my-bucket.v2/runs/r1/step-1.pt");
  EXPECT_EQ(parse_s3_url("s3://bucket").key, "");
  EXPECT_EQ(parse_s3_url("s3://bucket").child("a").str(), "s3://bucket/a");
}

TEST(S3Url, BucketNamesS3RefusesAreNamed) {
  for (const std::string bad : {"s3://Upper/x", "s3://ab/x", "s3://-dash/x", "s3://under_score", "s3:///key"}) {
    try {
      parse_s3_url(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad + ": '"), std::string::npos) << e.what();
    }
  }
}

TEST(S3Url, EncodesAllButTheUnreservedAsSigV4Wants) {
  EXPECT_EQ(uri_encode("a b/c+d~e_f.g-h", /*keep_slash=*/true), "a%20b/c%2Bd~e_f.g-h");
  EXPECT_EQ(uri_encode("runs/r1/", /*keep_slash=*/false), "runs%2Fr1%2F");
  EXPECT_EQ(uri_encode("\xC3\xA9", true), "%C3%A9");
}

}  // namespace
}  // namespace lockstep::s3
