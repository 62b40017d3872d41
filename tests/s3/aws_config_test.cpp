// The AWS settings and credentials found as the AWS SDKs find them, from an environment
// given as a map and files in a temporary folder.
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "lockstep/error.h"
#include "s3/aws_config.h"
#include "s3/credentials.h"
#include "support/tool_process.h"

namespace lockstep::s3 {
namespace {

Environment map_environment(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(AwsConfig, EnvironmentFirstThenTheProfileThenDefaults) {
  testing::TemporaryDirectory home;
  write(home.path() + "/config",
        "[default]\nregion = eu-west-1\n\n[profile lab]\nregion=us-west-2\nendpoint_url = http://store:9000\n");
  const std::string config = home.path() + "/config";
  EXPECT_EQ(region(map_environment({{"AWS_CONFIG_FILE", config}})), "eu-west-1");
  EXPECT_EQ(region(map_environment({{"AWS_CONFIG_FILE", config}, {"AWS_PROFILE", "lab"}})), "us-west-2");
  EXPECT_EQ(region(map_environment({{"AWS_CONFIG_FILE", config}, {"AWS_DEFAULT_REGION", "ap-south-1"}})), "ap-south-1");
  EXPECT_EQ(region(map_environment(
                {{"AWS_CONFIG_FILE", config}, {"AWS_REGION", "sa-east-1"}, {"AWS_DEFAULT_REGION", "ap-south-1"}})),
            "sa-east-1");
  EXPECT_EQ(region(map_environment({{"HOME", home.path() + "/nowhere"}})), "us-east-1");
  EXPECT_EQ(endpoint_url(map_environment({{"AWS_CONFIG_FILE", config}, {"AWS_PROFILE", "lab"}})), "http://store:9000");
  EXPECT_EQ(endpoint_url(map_environment({{"AWS_CONFIG_FILE", config},
                                          {"AWS_PROFILE", "lab"},
                                          {"AWS_ENDPOINT_URL", "http://a"},
                                          {"AWS_ENDPOINT_URL_S3", "http://b"}})),
            "http://b");
}

TEST(AwsConfig, ALineThatIsNeitherSectionNorKeyIsNamedWithItsFileAndLine) {
  testing::TemporaryDirectory home;
  write(home.path() + "/config", "[default]\nregion = eu-west-1\nthis is not a setting\n");
  try {
    region(map_environment({{"AWS_CONFIG_FILE", home.path() + "/config"}}));
    ADD_FAILURE() << "the file was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(home.path() + "/config:3: "), std::string::npos) << e.what();
  }
}

TEST(Credentials, EnvironmentThenCredentialsFileThenConfigFileNamingTheSource) {
  testing::TemporaryDirectory home;
  const std::string credentials = home.path() + "/credentials", config = home.path() + "/config";
  write(credentials, "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
  write(config,
        "[profile other]\naws_access_key_id = CONFIGKEY\naws_secret_access_key = configsecret\n"
        "aws_session_token = configtoken\n");
  const std::map<std::string, std::string> files{{"AWS_SHARED_CREDENTIALS_FILE", credentials},
                                                 {"AWS_CONFIG_FILE", config}};

  auto with_env = files;
  with_env.insert(
      {{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}, {"AWS_SESSION_TOKEN", "envtoken"}});
  const Credentials from_env = CredentialChain(map_environment(with_env)).get();
  EXPECT_EQ(from_env.access_key_id, "ENVKEY");
  EXPECT_EQ(from_env.session_token, "envtoken");
  EXPECT_EQ(from_env.source, "the environment (AWS_ACCESS_KEY_ID)");

  const Credentials from_file = CredentialChain(map_environment(files)).get();
  EXPECT_EQ(from_file.access_key_id, "FILEKEY");
  EXPECT_EQ(from_file.secret_access_key, "filesecret");
  EXPECT_EQ(from_file.source, "profile 'default' in " + credentials);

  auto other = files;
  other["AWS_PROFILE"] = "other";
  const Credentials from_config = CredentialChain(map_environment(other)).get();
  EXPECT_EQ(from_config.access_key_id, "CONFIGKEY");
  EXPECT_EQ(from_config.session_token, "configtoken");
  EXPECT_EQ(from_config.source, "profile 'other' in " + config);
}

TEST(Credentials, NoneOrHalfOfAPairIsAClearErrorWithoutAnySecret) {
  testing::TemporaryDirectory home;
  const auto message = [](const std::map<std::string, std::string>& env) {
    try {
      CredentialChain chain(map_environment(env));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string none = message({{"HOME", home.path()}});
  EXPECT_NE(none.find("S3 credentials: none found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"), std::string::npos)
      << none;
  const std::string half = message({{"HOME", home.path()}, {"AWS_SECRET_ACCESS_KEY", "hush-hush"}});
  EXPECT_EQ(half, "S3 credentials: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
  const std::string missing = message({{"HOME", home.path()}, {"AWS_PROFILE", "gone"}});
  EXPECT_NE(missing.find("profile 'gone' (AWS_PROFILE) has no keys in " + home.path() + "/.aws/credentials"),
            std::string::npos)
      << missing;
}

}  // namespace
}  // namespace lockstep::s3
