#!/usr/bin/env bash
# A 2 x 2 `lockstep train` job under a real Slurm against the same job on the same two
# namespaced hosts without Slurm (two PyTorchJob-style pods, each `lockstep train` starting
# its 2 workers), alternated REPEATS times (default 5) on one cluster from
# tests/support/slurm_cluster.sh. Prints each run's median samples/s over its logged steps
# (one log line per step), the median of the per-repeat ratios, and, for the Slurm job, the seconds from
# the batch script's first line to its first logged training step.
# Usage (root, after `make build`): bench/slurm_job.sh [REPEATS]
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
tool=$source_dir/build/tools/lockstep
repeats=${1:-5}
folder=$(mktemp -d /tmp/lockstep-slurm-bench-XXXXXX)
cluster() { bash "$source_dir/tests/support/slurm_cluster.sh" "$1" "$folder"; }
trap 'cluster down; rm -rf "$folder"' EXIT
eval "$(cluster up | sed 's/^/export /')"
client() { ip netns exec "$NETNS1" env SLURM_CONF="$SLURM_CONF" "$@"; }

# 4096 examples: 32 steps of 4 x 32 on 4 workers, each logged.
job() { echo "$tool" train --limit 4096 --val-limit 256 --batch-size 32 --log-every 1 --epochs 1 --out "$1"; }
# The median of the samples/s on the step lines of a run's output.
median_rate() {
  grep -o '[0-9.]* samples/s lr' "$1" | awk '{print $1}' | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

slurm_rates=() pod_rates=() to_first_step=()
for r in $(seq "$repeats"); do
  # Under Slurm: srun straight to the workers, rank 0's lines stamped as they come (by bash
  # itself: a `date` process per line would take CPU from the workers on a small machine).
  cat >"$folder/job-$r.sh" <<EOF
#!/bin/bash
start=\$EPOCHREALTIME
srun $(job "$folder/slurm-$r") | while IFS= read -r line; do echo "\$EPOCHREALTIME \$line"; done
echo "start \$start"
EOF
  id=$(client sbatch --parsable -N 2 --ntasks-per-node 2 -o "$folder/slurm-$r.out" "$folder/job-$r.sh")
  until client scontrol show job "$id" | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED)'; do sleep 0.5; done
  client scontrol show job "$id" | grep -q 'JobState=COMPLETED' || { cat "$folder/slurm-$r.out"; exit 1; }
  slurm_rates+=("$(median_rate "$folder/slurm-$r.out")")
  to_first_step+=("$(awk '/ step [0-9]+\// && !first { first = $1 } /^start / { start = $2 } END { printf "%.2f", first - start }' \
    "$folder/slurm-$r.out")")

  # The same job as two pods on the same hosts, without Slurm.
  for node in 0 1; do
    ns=$NETNS1; [ "$node" = 1 ] && ns=$NETNS2
    ip netns exec "$ns" env MASTER_ADDR="$ADDR1" MASTER_PORT=29400 PET_NNODES=2 PET_NPROC_PER_NODE=2 \
      PET_NODE_RANK=$node RANK=$node WORLD_SIZE=2 $(job "$folder/pods-$r") >"$folder/pods-$r-$node.out" 2>&1 &
  done
  wait
  pod_rates+=("$(median_rate "$folder/pods-$r-0.out")")
  echo "repeat $r: slurm ${slurm_rates[-1]} samples/s, pods ${pod_rates[-1]} samples/s, slurm job start to first step ${to_first_step[-1]} s"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Slurm's per-step time over the same job's without Slurm, within each repeat: the machine's
# slower drifts cancel.
ratios=()
for i in "${!slurm_rates[@]}"; do ratios+=("$(awk -v s="${slurm_rates[$i]}" -v p="${pod_rates[$i]}" 'BEGIN { print p / s }')"); done
s=$(median "${slurm_rates[@]}") p=$(median "${pod_rates[@]}") f=$(median "${to_first_step[@]}") q=$(median "${ratios[@]}")
awk -v s="$s" -v p="$p" -v f="$f" -v q="$q" -v n="$repeats" 'BEGIN {
  printf "medians of %d: under Slurm %.1f samples/s, same hosts without Slurm %.1f samples/s; per-step time under Slurm %+.1f%% (median of the per-repeat ratios); job start to first step %.2f s\n",
         n, s, p, 100 * (q - 1), f }'
