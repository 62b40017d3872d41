#include "support/s3_gateway.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace lockstep::testing {
S3Gateway::S3Gateway() {
  if (access("/usr/bin/radosgw", X_OK) != 0 || access("/usr/bin/ceph-osd", X_OK) != 0) {
    why_not_ = "Ceph's radosgw and ceph-osd are not installed (./scripts/install-deps.sh --test)";
    return;
  }
  const std::string dir = state_.path();
  port_ = free_port();
  cluster_ = std::make_unique<ToolProcess>(std::vector<std::string>{"setpriv", "--pdeathsig", "KILL", "bash",
                                                                    S3_GATEWAY_SCRIPT, dir, std::to_string(free_port()),
                                                                    std::to_string(port_)});
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
       std::chrono::steady_clock::now() < deadline;) {
    std::istringstream ready(read_file(dir + "/ready.env"));
    for (std::string line; std::getline(ready, line);) {
      if (line.rfind("ACCESS_KEY=", 0) == 0) access_key_ = line.substr(11);
      if (line.rfind("SECRET_KEY=", 0) == 0) secret_key_ = line.substr(11);
    }
    if (!secret_key_.empty()) return;
    if (!process_alive(cluster_->pid())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  cluster_->wait_for_exit(std::chrono::milliseconds(0));
  why_not_ = "the Ceph gateway did not start: " + cluster_->stderr_text() + " (logs: " + dir + "/log)";
}

S3Gateway::~S3Gateway() = default;  // the ToolProcess SIGKILLs the script, and with it the daemons

Env S3Gateway::credentials() const {
  return {{"AWS_ACCESS_KEY_ID", access_key_}, {"AWS_SECRET_ACCESS_KEY", secret_key_}};
}

bool S3Gateway::make_bucket(const std::string& name, std::string* why) const {
  // With curl's own SigV4, so that the test's buckets do not depend on the code under test.
  const Finished made = run_process(
      {"curl", "-sS", "-f", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
       access_key_ + ":" + secret_key_, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", endpoint() + "/" + name},
      {}, std::chrono::seconds(30));
  if (made.exit_code != 0 && why != nullptr) *why = made.output;
  return made.exit_code == 0;
}

Env S3Gateway::session_credentials(int seconds, std::string* why) const {
  // Signed by curl's own SigV4 too; the body is hashed into the signature, as STS expects.
  const Finished assumed = run_process(
      {"curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:sts", "--user", access_key_ + ":" + secret_key_, "-d",
       "Action=AssumeRole&RoleArn=arn:aws:iam:::role/session&RoleSessionName=lockstep-test&DurationSeconds=" +
           std::to_string(seconds) + "&Version=2011-06-15",
       endpoint() + "/"},
      {}, std::chrono::seconds(30));
  const auto field = [&](const std::string& name) {
    const size_t open = assumed.output.find("<" + name + ">");
    const size_t close = assumed.output.find("</" + name + ">");
    if (open == std::string::npos || close == std::string::npos) return std::string();
    return assumed.output.substr(open + name.size() + 2, close - open - name.size() - 2);
  };
  Env env{{"AWS_ACCESS_KEY_ID", field("AccessKeyId")},
          {"AWS_SECRET_ACCESS_KEY", field("SecretAccessKey")},
          {"AWS_SESSION_TOKEN", field("SessionToken")}};
  for (const auto& [key, value] : env) {
    if (!value.empty()) continue;
    if (why != nullptr) *why = "AssumeRole gave no " + key + ": " + assumed.output;
    return {};
  }
  return env;
}

std::string S3Gateway::log_text() const { return read_file(state_.path() + "/log/client.rgw.log"); }

}  // namespace lockstep::testing
