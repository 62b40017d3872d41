#include "support/network_hosts.h"

#include <unistd.h>

#include <cstdlib>

namespace lockstep::testing {
namespace {

// Runs a shell command quietly; true when it succeeded.
bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

NetworkHosts::NetworkHosts() {
  const int id = getpid();
  names_[0] = "lsa" + std::to_string(id);
  names_[1] = "lsb" + std::to_string(id);
  subnet_ = "10." + std::to_string(100 + id % 100) + "." + std::to_string(id / 100 % 250) + ".";
  const std::string a = names_[0], b = names_[1];
  if (!run("ip netns add " + a)) {
    why_not_ = "cannot make network namespaces here (`ip netns add` failed: needs root or CAP_SYS_ADMIN)";
    return;
  }
  const bool made = run("ip netns add " + b) && run("ip link add " + a + " type veth peer name " + b) &&
                    run("ip link set " + a + " netns " + a) && run("ip link set " + b + " netns " + b) &&
                    run("ip -n " + a + " addr add " + subnet_ + "1/24 dev " + a) &&
                    run("ip -n " + b + " addr add " + subnet_ + "2/24 dev " + b) &&
                    run("ip -n " + a + " link set " + a + " up") && run("ip -n " + b + " link set " + b + " up") &&
                    run("ip -n " + a + " link set lo up") && run("ip -n " + b + " link set lo up");
  if (!made) why_not_ = "cannot join two network namespaces with a veth pair here";
}

NetworkHosts::~NetworkHosts() {
  for (const auto& name : names_) run("ip netns del " + name);  // takes its end of the veth pair along
}

void NetworkHosts::cut_off(int host) const { run("ip -n " + names_[host] + " link set " + names_[host] + " down"); }

std::string NetworkHosts::address(int host) const { return subnet_ + std::to_string(host + 1); }

std::vector<std::string> NetworkHosts::on(int host, const std::vector<std::string>& command) const {
  std::vector<std::string> inside = {"ip", "netns", "exec", names_[host]};
  inside.insert(inside.end(), command.begin(), command.end());
  return inside;
}

}  // namespace lockstep::testing
