#include "support/nginx_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/world.h"

namespace lockstep::testing {
namespace {

bool accepts_connections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return connected;
}

}  // namespace

NginxServer::NginxServer(const std::string& folder, bool https) : https_(https) {
  const std::string state = state_.path();
  if (access("/usr/sbin/nginx", X_OK) != 0) {
    why_not_ = "nginx is not installed (apt-get install nginx, or ./scripts/install-deps.sh --test)";
    return;
  }
  if (https) {
    const Finished made = run_process({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                       "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                                       "-keyout", state + "/key.pem", "-out", state + "/cert.pem"});
    if (made.exit_code != 0) {
      why_not_ = "openssl could not make a certificate: " + made.output;
      return;
    }
  }
  port_ = free_port();
  std::ofstream config(state + "/nginx.conf");
  // One process (no master, no workers), so that killing it leaves nothing behind.
  config << "daemon off;\nmaster_process off;\npid " << state << "/nginx.pid;\nerror_log " << state << "/error.log;\n"
         << (geteuid() == 0 ? "user root;\n" : "") << "events { worker_connections 256; }\n"
         << "http {\n  access_log " << state << "/access.log;\n"
         << "  client_body_temp_path " << state << "/body;\n  proxy_temp_path " << state << "/proxy;\n"
         << "  fastcgi_temp_path " << state << "/fastcgi;\n  uwsgi_temp_path " << state << "/uwsgi;\n"
         << "  scgi_temp_path " << state << "/scgi;\n  default_type application/octet-stream;\n"
         << "  server {\n    listen 127.0.0.1:" << port_ << (https ? " ssl" : "") << ";\n    root " << folder << ";\n"
         << "    location /forbidden/ { deny all; }\n";
  if (https)
    config << "    ssl_certificate " << state << "/cert.pem;\n    ssl_certificate_key " << state << "/key.pem;\n";
  config << "  }\n}\n";
  config.close();

  // setpriv's parent-death signal: nginx goes with this process even when it dies without
  // running destructors (an abort, a crash), so no server outlives a test.
  nginx_ = std::make_unique<ToolProcess>(std::vector<std::string>{"setpriv", "--pdeathsig", "KILL", "/usr/sbin/nginx",
                                                                  "-p", state, "-c", state + "/nginx.conf", "-e",
                                                                  state + "/error.log"});
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       std::chrono::steady_clock::now() < deadline;) {
    if (accepts_connections(port_)) return;
    if (!process_alive(nginx_->pid())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nginx_->wait_for_exit(std::chrono::milliseconds(0));
  why_not_ = "nginx did not start serving on port " + std::to_string(port_) + ": " + nginx_->stderr_text() +
             read_file(state + "/error.log");
}

NginxServer::~NginxServer() = default;  // the ToolProcess SIGKILLs nginx

std::string NginxServer::url() const {
  return std::string(https_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

}  // namespace lockstep::testing
