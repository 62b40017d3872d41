// `lockstep eval` against the validation pass inside `lockstep train`, in samples per second:
//
//   bench/eval_speed
//
// trains the default CNN on 2 replicas (6,400 examples an epoch, a log line at each epoch's
// end) and validates on Fashion-MNIST's whole test split (10,000) after each epoch; a
// validation pass inside training lasts from the epoch's last train record to its val
// record (metrics.jsonl). In 7 rounds, each trains one epoch more (--resume) and then runs
// `lockstep eval RUN -n 2` on the checkpoint it ended with, with the same replicas, batches
// and loader threads (it prints its own rate). The figures are medians, and the median of
// the rounds' ratios eval / train is what must be at least 1.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "median.h"

namespace {

namespace fs = std::filesystem;
using lockstep::bench::median;

// What `command` printed on stdout and stderr; exits when it failed.
std::string output_of(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string output;
  char chunk[4096];
  while (size_t n = fread(chunk, 1, sizeof chunk, pipe)) output.append(chunk, n);
  if (pclose(pipe) != 0) {
    std::fprintf(stderr, "failed: %s\n%s", command.c_str(), output.c_str());
    std::exit(1);
  }
  return output;
}

// The number after "KEY": in a JSON line (metrics.jsonl has no nesting).
double number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atof(line.c_str() + at + key.size() + 3);
}

// Samples per second of each validation pass of a run: samples over the time from the train
// record of the same step to the val record.
std::vector<double> validation_rates(const std::string& run) {
  std::ifstream metrics(run + "/metrics.jsonl");
  std::map<double, double> train_time;  // step -> time
  std::vector<double> rates;
  for (std::string line; std::getline(metrics, line);) {
    const double step = number_after(line, "step"), time = number_after(line, "time");
    if (line.find("\"phase\":\"train\"") != std::string::npos) train_time[step] = time;
    if (line.find("\"phase\":\"val\"") != std::string::npos && train_time.count(step)) {
      rates.push_back(number_after(line, "samples") / (time - train_time[step]));
    }
  }
  return rates;
}

}  // namespace

int main() {
  const std::string tool =
      (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "lockstep").string();
  const std::string run = fs::temp_directory_path() / ("lockstep-eval-speed-" + std::to_string(getpid()));
  // Interleaved, so that the machine's drift falls on both alike: each round trains one
  // more epoch (and validates), then evaluates the checkpoint it ended with.
  std::vector<double> by_eval, pairs;
  std::string last;
  for (int epochs = 1; epochs <= 7; ++epochs) {
    output_of(tool + " train --mode threads -n 2 --limit 6400 --epochs " + std::to_string(epochs) +
              " --log-every 50 --out " + run + (epochs > 1 ? " --resume" : ""));
    last = output_of(tool + " eval " + run + " -n 2");
    const size_t end = last.rfind(" samples/s");
    by_eval.push_back(std::atof(last.c_str() + last.rfind(' ', end - 1) + 1));
  }
  const std::vector<double> in_training = validation_rates(run);
  if (in_training.size() != 7) {
    std::fprintf(stderr, "expected 7 validations in %s/metrics.jsonl, found %zu\n", run.c_str(), in_training.size());
    return 1;
  }
  for (size_t i = 0; i < by_eval.size(); ++i) pairs.push_back(by_eval[i] / in_training[i]);
  fs::remove_all(run);
  std::printf("%s", last.c_str());
  std::printf("validation of 10,000 test images on 2 replicas, samples/s (medians of 7 rounds):\n");
  std::printf("  inside lockstep train  %8.0f\n", median(in_training));
  std::printf("  lockstep eval          %8.0f\n", median(by_eval));
  std::printf("  eval / train           %8.3f  (median of each round's ratio)\n", median(pairs));
  return 0;
}
