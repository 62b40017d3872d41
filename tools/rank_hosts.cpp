#include "rank_hosts.h"

#include <unistd.h>

#include <algorithm>

#include <torch/torch.h>

#include "lockstep/comm/collectives.h"

namespace lockstep::tools {
namespace {

constexpr int kNameBytes = 256;  // HOST_NAME_MAX is 64; the rest stays zero

std::string ranks(int first, int last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

std::string ranks_on_hosts() {
  auto name = torch::zeros({kNameBytes}, torch::kUInt8);
  gethostname(reinterpret_cast<char*>(name.data_ptr<uint8_t>()), kNameBytes - 1);
  std::vector<std::string> hosts;
  for (const auto& gathered : all_gather(name))
    hosts.emplace_back(reinterpret_cast<const char*>(gathered.data_ptr<uint8_t>()));
  if (std::all_of(hosts.begin(), hosts.end(), [&](const std::string& host) { return host == hosts.front(); }))
    return "";
  std::string line = "ranks on hosts:";
  for (size_t first = 0; first < hosts.size();) {
    size_t last = first;
    while (last + 1 < hosts.size() && hosts[last + 1] == hosts[first]) ++last;
    line += (first == 0 ? " " : ", ") + ranks(static_cast<int>(first), static_cast<int>(last)) + " " + hosts[first];
    first = last + 1;
  }
  return line;
}

}  // namespace lockstep::tools
