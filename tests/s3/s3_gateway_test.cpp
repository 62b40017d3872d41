// Datasets in a real S3: Ceph's RADOS Gateway, started once for this program on loopback
// (tests/support/s3_gateway.h), which verifies SigV4 strictly. Packed into a bucket and
// trained from it, the losses are those of local shards, to every digit; credentials come
// from the environment or a profile; each mistake is one line naming what to fix.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/shards.h"
#include "lockstep/error.h"
#include "lockstep/train/checkpoint.h"
#include "s3/credentials.h"
#include "s3/s3_client.h"
#include "support/fault_proxy.h"
#include "support/loopback_server.h"
#include "support/s3_gateway.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

S3Gateway* gateway = nullptr;

class GatewayEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    owned_ = std::make_unique<S3Gateway>();
    gateway = owned_.get();
  }
  void TearDown() override {
    gateway = nullptr;
    owned_.reset();
  }

 private:
  std::unique_ptr<S3Gateway> owned_;
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new GatewayEnvironment);

#define SKIP_WITHOUT_THE_GATEWAY() \
  if (!gateway->available()) GTEST_SKIP() << gateway->why_not();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Env with(Env env, const Env& more) {
  for (const auto& [key, value] : more) env[key] = value;
  return env;
}

// The registry the tests read: local shards and the same shards in the bucket, reached
// path-style and virtual-hosted, and two mistakes.
struct Datasets {
  Datasets() {
    const std::string local = folder.path() + "/local";
    toml = folder.path() + "/Data.toml";
    std::ofstream(toml) << "[local]\ntype = \"shards\"\npath = \"" << local << "\"\n\n"
                        << "[in-s3]\ntype = \"shards\"\npath = \"s3://datasets/fashion\"\nendpoint = \""
                        << gateway->endpoint() << "\"\n\n"
                        << "[virtual]\ntype = \"shards\"\npath = \"s3://datasets/fashion\"\nendpoint = \""
                        << gateway->virtual_endpoint() << "\"\naddressing = \"virtual\"\n\n"
                        << "[no-bucket]\ntype = \"shards\"\npath = \"s3://no-such-bucket/fashion\"\nendpoint = \""
                        << gateway->endpoint() << "\"\n\n"
                        << "[no-key]\ntype = \"shards\"\npath = \"s3://datasets/nothing\"\nendpoint = \""
                        << gateway->endpoint() << "\"\n";
  }
  TemporaryDirectory folder;
  std::string toml;
};

Datasets* datasets = nullptr;

// Packs Fashion-MNIST once: into a local folder and into the bucket.
class S3Datasets : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gateway->available()) return;
    std::string why;
    ASSERT_TRUE(gateway->make_bucket("datasets", &why)) << why;
    datasets = new Datasets;
    for (const std::string out : {datasets->folder.path() + "/local", std::string("s3://datasets/fashion")}) {
      const Finished packed = run_process({LOCKSTEP_TOOL, "data", "pack", "--dataset", "fashion-mnist", "--out", out,
                                           "--shard-size", "8MB", "--endpoint", gateway->endpoint()},
                                          gateway->credentials(), std::chrono::seconds(300));
      ASSERT_EQ(packed.exit_code, 0) << packed.output;
      EXPECT_TRUE(contains(packed.output, "packed 60000 train examples")) << packed.output;
    }
  }
  static void TearDownTestSuite() {
    delete datasets;
    datasets = nullptr;
  }

  Finished train(const std::string& dataset, const std::string& out, const Env& env,
                 const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> command{LOCKSTEP_TOOL,  "train", "--data-toml", datasets->toml,
                                     "--dataset",    dataset, "--limit",     "1024",
                                     "--val-limit",  "512",   "--epochs",    "2",
                                     "--batch-size", "32",    "--out",       out};
    command.insert(command.end(), extra.begin(), extra.end());
    // Two workers unless `extra` says how many.
    if (std::find(extra.begin(), extra.end(), "-n") == extra.end()) command.insert(command.end(), {"-n", "2"});
    return run_process(command, env, std::chrono::seconds(300));
  }

  static std::string losses(const std::string& run) {
    std::ifstream metrics(run + "/metrics.jsonl");
    std::string line, all;
    while (std::getline(metrics, line)) {
      const size_t at = line.find("\"loss\":");
      all += line.substr(at, line.find(',', at) - at) + "\n";
    }
    return all;
  }
};

TEST_F(S3Datasets, TrainingFromTheBucketEndsWithTheLossesOfLocalShardsPathStyleAndVirtualHosted) {
  SKIP_WITHOUT_THE_GATEWAY();
  TemporaryDirectory runs;
  const Finished local = train("local", runs.path() + "/local", {});
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const std::string expected = losses(runs.path() + "/local");
  ASSERT_GE(std::count(expected.begin(), expected.end(), '\n'), 4) << expected;
  for (const auto& [dataset, mode] : std::vector<std::pair<std::string, std::string>>{
           {"in-s3", "processes"}, {"in-s3", "threads"}, {"virtual", "processes"}}) {
    const std::string run = runs.path() + "/" + dataset + "-" + mode;
    const Finished trained = train(dataset, run, gateway->credentials(), {"--mode", mode});
    ASSERT_EQ(trained.exit_code, 0) << dataset << " in " << mode << ":\n" << trained.output;
    EXPECT_EQ(losses(run), expected) << dataset << " in " << mode;
  }
}

// Three worker processes with two loader threads each read each split's index once in
// all: the launcher reads it, checking the job before it starts them, and they take its copy.
TEST_F(S3Datasets, AJobReadsEachIndexOnceWhateverItsWorkersAndLoaderThreads) {
  SKIP_WITHOUT_THE_GATEWAY();
  FaultProxy counting(gateway->port(), Fault::kAnswer503, 0);
  TemporaryDirectory runs;
  const std::string toml = runs.path() + "/Data.toml";
  std::ofstream(toml) << "[counted]\ntype = \"shards\"\npath = \"s3://datasets/fashion\"\nendpoint = \""
                      << counting.url() << "\"\n";
  const Finished trained = run_process({LOCKSTEP_TOOL, "train",   "--data-toml", toml,          "--dataset",
                                        "counted",     "--limit", "512",         "--val-limit", "256",
                                        "--epochs",    "1",       "-n",          "3",           "--threads",
                                        "2",           "--mode",  "processes",   "--out",       runs.path() + "/run"},
                                       gateway->credentials(), std::chrono::seconds(300));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(counting.requests_with("/fashion/train.index.json "), 1);
  EXPECT_EQ(counting.requests_with("/fashion/test.index.json "), 1);
}

TEST_F(S3Datasets, CredentialsFromAProfileInTheCredentialsOrTheConfigFile) {
  SKIP_WITHOUT_THE_GATEWAY();
  TemporaryDirectory home;
  const std::string keys =
      "aws_access_key_id = " + gateway->access_key() + "\naws_secret_access_key = " + gateway->secret_key() + "\n";
  std::ofstream(home.path() + "/credentials") << "[lab]\n" << keys;
  std::ofstream(home.path() + "/config") << "[profile lab2]\n" << keys;
  const Env files{{"HOME", home.path()},
                  {"AWS_SHARED_CREDENTIALS_FILE", home.path() + "/credentials"},
                  {"AWS_CONFIG_FILE", home.path() + "/config"}};
  for (const std::string profile : {"lab", "lab2"}) {
    const Finished listed = run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", datasets->toml},
                                        with(files, {{"AWS_PROFILE", profile}}), std::chrono::seconds(60));
    EXPECT_TRUE(contains(listed.output, "in-s3  shards  s3://datasets/fashion  splits test,train  readable"))
        << profile << ":\n"
        << listed.output;
  }
}

// A session token from the gateway's STS signs reads while the session lasts (once over,
// the next test's expired-session case is refused).
TEST_F(S3Datasets, CredentialsWithASessionTokenReadWhileTheSessionLasts) {
  SKIP_WITHOUT_THE_GATEWAY();
  std::string why;
  const Env session = gateway->session_credentials(600, &why);
  ASSERT_FALSE(session.empty()) << why;
  const Finished listed =
      run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", datasets->toml}, session, std::chrono::seconds(60));
  EXPECT_TRUE(contains(listed.output, "in-s3  shards  s3://datasets/fashion  splits test,train  readable"))
      << listed.output;
}

TEST_F(S3Datasets, EachMistakeIsOneLineNamingTheBucketKeyCodeAndCredentialsWithoutTheSecret) {
  SKIP_WITHOUT_THE_GATEWAY();
  TemporaryDirectory runs;
  const Env good = gateway->credentials();
  const std::string from_env = "; credentials from the environment (AWS_ACCESS_KEY_ID)";
  struct Case {
    std::string dataset;
    Env env;
    std::string said;
  };
  std::vector<Case> cases{
      {"in-s3", with(good, {{"AWS_SECRET_ACCESS_KEY", "not-the-secret-0123456789"}}),
       "lockstep train: cannot read s3://datasets/fashion/train.index.json: S3 said SignatureDoesNotMatch (HTTP 403) "
       "for bucket 'datasets', key 'fashion/train.index.json'" +
           from_env},
      {"in-s3", with(good, {{"AWS_ACCESS_KEY_ID", "NOSUCHKEYID0123"}}),
       "lockstep train: cannot read s3://datasets/fashion/train.index.json: S3 said InvalidAccessKeyId (HTTP 403) "
       "for bucket 'datasets', key 'fashion/train.index.json'" +
           from_env},
      {"no-bucket", good,
       "lockstep train: cannot read s3://no-such-bucket/fashion/train.index.json: S3 said NoSuchBucket (HTTP 404): "
       "there is no bucket 'no-such-bucket' at " +
           gateway->endpoint() + " (region us-east-1, path-style)" + from_env},
      {"no-key", good,
       "lockstep train: cannot read s3://datasets/nothing/train.index.json: S3 said NoSuchKey (HTTP 404): no object "
       "'nothing/train.index.json' in bucket 'datasets'" +
           from_env},
  };
  // A session of 1 s from the gateway's STS, used once it has expired.
  std::string why;
  const Env session = gateway->session_credentials(1, &why);
  ASSERT_FALSE(session.empty()) << why;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  cases.push_back(
      {"in-s3", session,
       "lockstep train: cannot read s3://datasets/fashion/train.index.json: S3 said InvalidAccessKeyId (HTTP 403) "
       "for bucket 'datasets', key 'fashion/train.index.json'" +
           from_env + ", with a session token: if it has expired, get new credentials"});
  for (const auto& c : cases) {
    const Finished run = train(c.dataset, runs.path() + "/run", c.env);
    EXPECT_NE(run.exit_code, 0) << c.dataset;
    EXPECT_TRUE(contains(run.output, c.said + "\n")) << "expected:\n" << c.said << "\ngot:\n" << run.output;
    EXPECT_FALSE(contains(run.output, gateway->secret_key())) << run.output;
    EXPECT_FALSE(contains(run.output, "not-the-secret-0123456789")) << run.output;
    for (const auto& [key, value] : c.env) {
      if (key != "AWS_ACCESS_KEY_ID") EXPECT_FALSE(contains(run.output, value)) << key << " shown:\n" << run.output;
    }
  }
}

// This process's environment with the gateway's keys and endpoint while it lives, for
// reading checkpoints from the bucket here (the processes the tests start get theirs).
class GatewayCredentialsHere {
 public:
  GatewayCredentialsHere() {
    for (const auto& [key, value] : with(gateway->credentials(), {{"AWS_ENDPOINT_URL", gateway->endpoint()}})) {
      setenv(key.c_str(), value.c_str(), 1);
      set_.push_back(key);
    }
  }
  ~GatewayCredentialsHere() {
    for (const auto& key : set_) unsetenv(key.c_str());
  }

 private:
  std::vector<std::string> set_;
};

// A run stopped mid-way with its checkpoints in the bucket, then resumed from them, ends
// with the parameters of a run never stopped: plain, and a run of no default (the MLP,
// AdamW, ZeRO-1 with its optimizer shards, 3 workers, a global batch) resumed with
// `--out s3://... --resume` alone, from the settings it keeps in the bucket.
TEST_F(S3Datasets, CheckpointsInTheBucketResumeToTheParametersOfAnUninterruptedRun) {
  SKIP_WITHOUT_THE_GATEWAY();
  std::string why;
  ASSERT_TRUE(gateway->make_bucket("runs", &why)) << why;
  TemporaryDirectory runs;
  const Env env = with(gateway->credentials(), {{"AWS_ENDPOINT_URL", gateway->endpoint()}});
  for (const std::vector<std::string>& settings :
       {std::vector<std::string>{},
        std::vector<std::string>{"--model", "mlp", "--optimizer", "adamw", "--zero", "1", "-n", "3",
                                 "--global-batch-size", "64", "--mode", "processes"}}) {
    const std::string name = settings.empty() ? "plain" : "zero1";
    const Finished whole = train("local", runs.path() + "/" + name, {}, settings);
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    const std::string out = "s3://runs/" + name;
    auto stopped = settings;
    stopped.insert(stopped.end(), {"--stop-after-step", "20"});
    const Finished first = train("local", out, env, stopped);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_TRUE(contains(first.output, "continue with: lockstep train --out " + out + " --resume")) << first.output;
    const Finished again = train("local", out, env, settings);
    EXPECT_TRUE(contains(again.output, out + " already holds a run's checkpoints; add --resume")) << again.output;
    const Finished second = settings.empty() ? train("local", out, env, {"--resume"})
                                             : run_process({LOCKSTEP_TOOL, "train", "--out", out, "--resume"}, env,
                                                           std::chrono::seconds(300));
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_TRUE(contains(second.output, "checkpoints in " + out + "/checkpoints")) << second.output;

    GatewayCredentialsHere keys;
    const auto expected = train::load_state_dict(runs.path() + "/" + name + "/checkpoints/step-0000000032.pt");
    const auto got = train::load_state_dict(out + "/checkpoints/step-0000000032.pt");
    ASSERT_EQ(got.size(), expected.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::equal(got[i].second, expected[i].second)) << name << ": " << got[i].first << " differs";
    }
  }
}

// 600 test examples of Fashion-MNIST in 4 shards, packed into s3://faults/shards and kept
// here to compare with.
struct SmallSplit {
  SmallSplit() {
    original = data::first_examples(data::read_fashion_mnist(FASHION_MNIST_DIR, "t10k"), 600);
    data::pack_shards(*original, "test", "s3://faults/shards",
                      data::PackOptions()
                          .shard_bytes(400 * 1024)
                          .class_names(data::fashion_mnist_classes())
                          .endpoint(gateway->endpoint()));
  }
  std::shared_ptr<data::Dataset> original;
};

bool same_examples(const data::Dataset& read, const data::Dataset& original) {
  if (read.size() != original.size()) return false;
  for (size_t i = 0; i < read.size(); ++i) {
    const auto back = read.get(i), expected = original.get(i);
    if (back.label != expected.label || !torch::equal(back.image, expected.image)) return false;
  }
  return true;
}

// The faults of real networks and S3's own 503 SlowDown, from a proxy in front of the
// gateway: retried to the same samples, one GET per shard read besides.
TEST(S3Faults, ResetsMidBodySlowDownsAndStallsAreRetriedToTheSameSamplesWithOneGetPerShard) {
  SKIP_WITHOUT_THE_GATEWAY();
  std::string why;
  ASSERT_TRUE(gateway->make_bucket("faults", &why)) << why;
  GatewayCredentialsHere keys;
  const SmallSplit split;
  {
    FaultProxy counting(gateway->port(), Fault::kAnswer503, 0);
    const data::ShardDataset read("s3://faults/shards", "test", data::ShardOptions().endpoint(counting.url()));
    EXPECT_TRUE(same_examples(read, *split.original));
    EXPECT_EQ(read.shard_reads(), 4);
    EXPECT_EQ(counting.requests(), 1 + 4) << "the index, then one GET per shard";
  }
  for (const Fault fault : {Fault::kCloseMidBody, Fault::kAnswer503, Fault::kStall}) {
    SCOPED_TRACE(fault == Fault::kCloseMidBody ? "closed mid-body"
                 : fault == Fault::kAnswer503  ? "SlowDown"
                                               : "stalled");
    const int spoiled = fault == Fault::kStall ? 1 : 3;
    FaultProxy proxy(gateway->port(), fault, spoiled);
    const data::ShardDataset read("s3://faults/shards", "test", data::ShardOptions().endpoint(proxy.url()).timeout(2));
    EXPECT_TRUE(same_examples(read, *split.original));
    EXPECT_EQ(proxy.requests(), spoiled + 1 + 4);
  }
  FaultProxy failing(gateway->port(), Fault::kAnswer503, 1000000);
  std::string message = "no error";
  try {
    data::ShardDataset("s3://faults/shards", "test", data::ShardOptions().endpoint(failing.url()).timeout(0.5));
  } catch (const DataError& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message,
                       "cannot read s3://faults/shards/test.index.json: S3 said SlowDown (HTTP 503) for bucket "
                       "'faults', key 'shards/test.index.json': Please reduce your request rate. (gave up after "))
      << message;
  EXPECT_TRUE(contains(message, "; credentials from the environment (AWS_ACCESS_KEY_ID)")) << message;
}

// Objects above multipart_bytes go up in parts, in parallel; an upload that fails (here:
// parts below S3's 5 MiB minimum, refused when it is completed) is aborted, leaving no
// object and no parts.
TEST(S3Uploads, LargeObjectsGoUpInPartsAndAFailedUploadLeavesNothingBehind) {
  SKIP_WITHOUT_THE_GATEWAY();
  std::string why;
  ASSERT_TRUE(gateway->make_bucket("uploads", &why)) << why;
  GatewayCredentialsHere keys;
  std::vector<uint8_t> bytes(12 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);

  s3::S3Settings in_parts;
  in_parts.endpoint = gateway->endpoint();
  in_parts.multipart_bytes = 6 << 20;
  in_parts.part_bytes = 5 << 20;
  const s3::S3Client client(in_parts);
  const s3::S3Url object = s3::parse_s3_url("s3://uploads/big.bin");
  client.put(object, bytes.data(), bytes.size());
  EXPECT_EQ(client.get(object), bytes);
  EXPECT_TRUE(contains(gateway->log_text(), "partNumber=3&uploadId=")) << "not uploaded in 3 parts";

  s3::S3Settings too_small = in_parts;
  too_small.multipart_bytes = 2 << 20;
  too_small.part_bytes = 1 << 20;
  const s3::S3Url refused = s3::parse_s3_url("s3://uploads/refused.bin");
  std::string message = "no error";
  try {
    s3::S3Client(too_small).put(refused, bytes.data(), 3 << 20);
  } catch (const DataError& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, "cannot complete the upload of s3://uploads/refused.bin: S3 said EntityTooSmall"))
      << message;
  EXPECT_FALSE(client.get_if_present(refused).has_value());
  const Finished pending =
      run_process({"curl", "-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                   gateway->access_key() + ":" + gateway->secret_key(), "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                   gateway->endpoint() + "/uploads?uploads="});
  EXPECT_TRUE(contains(pending.output, "<ListMultipartUploadsResult")) << pending.output;
  EXPECT_FALSE(contains(pending.output, "<Upload>")) << pending.output;
}

// A container credentials endpoint of the test's own, as ECS and EKS Pod Identity serve
// one: the gateway's keys, valid for `valid_for`, to requests that bring `token`; 401 to
// others.
class CredentialsEndpoint {
 public:
  CredentialsEndpoint(std::string token, std::chrono::seconds valid_for)
      : token_(std::move(token)),
        valid_for_(valid_for),
        server_([this](int client, const std::string& head, int) { answer(client, head); }) {}

  std::string url() const { return server_.url() + "/credentials"; }
  int requests() const { return server_.requests(); }

 private:
  void answer(int client, const std::string& head) const {
    if (!contains(head, "\r\nAuthorization: " + token_ + "\r\n")) {
      send_all(client, http_response("401 Unauthorized", "text/plain", "no token"));
      return;
    }
    const std::time_t expires = std::time(nullptr) + valid_for_.count();
    char expiration[32];
    std::strftime(expiration, sizeof expiration, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&expires));
    send_all(client,
             http_response("200 OK", "application/json",
                           "{\"AccessKeyId\": \"" + gateway->access_key() + "\", \"SecretAccessKey\": \"" +
                               gateway->secret_key() + "\", \"Token\": \"\", \"Expiration\": \"" + expiration + "\"}"));
  }

  std::string token_;
  std::chrono::seconds valid_for_;
  LoopbackServer server_;  // last: its threads use the members above
};

TEST_F(S3Datasets, CredentialsFromAContainerEndpointFetchedAgainBeforeTheyExpire) {
  SKIP_WITHOUT_THE_GATEWAY();
  TemporaryDirectory home;
  const std::string token = "container-token-5f1e";
  const CredentialsEndpoint endpoint(token, std::chrono::hours(1));
  const Env container{{"HOME", home.path()},
                      {"AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url()},
                      {"AWS_CONTAINER_AUTHORIZATION_TOKEN", token}};
  const Finished listed =
      run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", datasets->toml}, container, std::chrono::seconds(60));
  EXPECT_TRUE(contains(listed.output, "in-s3  shards  s3://datasets/fashion  splits test,train  readable"))
      << listed.output;

  const auto environment = [](const Env& values) {
    return s3::Environment([values](const std::string& name) -> std::optional<std::string> {
      const auto found = values.find(name);
      return found == values.end() ? std::nullopt : std::optional<std::string>(found->second);
    });
  };
  const int before = endpoint.requests();
  s3::CredentialChain lasting(environment(container));
  lasting.get();
  lasting.get();
  EXPECT_EQ(endpoint.requests(), before + 1) << "credentials valid for an hour are fetched once";
  const CredentialsEndpoint short_lived(token, std::chrono::minutes(4));
  s3::CredentialChain expiring(
      environment(with(container, {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", short_lived.url()}})));
  EXPECT_EQ(expiring.get().source, "the container credentials endpoint " + short_lived.url());
  expiring.get();
  EXPECT_EQ(short_lived.requests(), 3) << "within five minutes of expiry, each use fetches them again";

  const Finished refused =
      run_process({LOCKSTEP_TOOL, "datasets", "--data-toml", datasets->toml},
                  with(container, {{"AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong-token-77"}}), std::chrono::seconds(60));
  EXPECT_TRUE(contains(refused.output,
                       "S3 credentials: the container credentials endpoint " + endpoint.url() + " answered HTTP 401"))
      << refused.output;
  EXPECT_FALSE(contains(refused.output, "wrong-token-77")) << refused.output;
  EXPECT_FALSE(contains(listed.output + refused.output, token)) << "the token was printed";
}

}  // namespace
}  // namespace lockstep::testing
