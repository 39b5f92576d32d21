#!/usr/bin/env bash
# Compares the simulator's speed at two revisions in one run, as BENCHMARKS.md reports it:
# both are built side by side, then `sim bench --nodes N` of each runs in turn, round after
# round, and the best of each is kept (this machine is shared: the slower runs measure its
# other tenants). With INSTRUCTIONS=1, callgrind also counts the instructions of one
# `sim bench --nodes N` per revision: deterministic, so a small change shows through noise.
#
# usage: sim/compare-speed.sh BEFORE AFTER [NODES...]      (default nodes: 5 20 100)
#   ROUNDS=3         rounds of alternating runs
#   INSTRUCTIONS=0   1: count instructions with valgrind's callgrind as well
#   WORK=/tmp/shoal-compare-speed   where the sources, target dirs and binaries go
#
# example: sim/compare-speed.sh HEAD~1 HEAD 100 1000
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before=$1
after=$2
shift 2
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(5 20 100)
rounds=${ROUNDS:-3}
work=${WORK:-/tmp/shoal-compare-speed}
repo=$(git rev-parse --show-toplevel)

for n in "${sizes[@]}"; do
  [[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || { echo "not a node count: $n" >&2; exit 2; }
done
[[ $rounds =~ ^[0-9]+$ && $rounds -gt 0 ]] || { echo "ROUNDS is not a positive count: $rounds" >&2; exit 2; }

mkdir -p "$work"
# Builds revision $1 from a clean export of its tree (uncommitted changes are not part of
# it), in a target dir of its own (with one shared target dir, cargo found the second tree's
# build fresh and both binaries were the first revision's). Prints the binary's path.
build() {
  local rev commit src
  rev=$1
  commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
  src="$work/src-$commit"
  if [[ ! -d $src ]]; then
    mkdir -p "$src.tmp"
    git -C "$repo" archive "$commit" | tar -x -C "$src.tmp"
    mv "$src.tmp" "$src"
  fi
  if [[ ! -x $work/sim-$commit ]]; then
    echo "building $rev ($commit)" >&2
    (cd "$src" && cargo build --quiet --release -p sim --target-dir "$work/target-$commit") >&2
    cp "$work/target-$commit/release/sim" "$work/sim-$commit"
  fi
  echo "$work/sim-$commit"
}

bins=("$(build "$before")" "$(build "$after")")
names=("$before" "$after")

# best[i,n] = "events/s acceleration" of the run with the highest acceleration
declare -A best
for ((round = 1; round <= rounds; round++)); do
  for n in "${sizes[@]}"; do
    for i in 0 1; do
      # The bench's last line: nodes events wall events/s simulated acceleration("123x").
      read -r _ _ _ rate _ accel < <("${bins[$i]}" bench --nodes "$n" | tail -1)
      accel=${accel%x}
      echo "round $round, $n nodes, ${names[$i]}: $rate events/s, ${accel}x" >&2
      prev=${best[$i,$n]:-}
      if [[ -z $prev ]] || (( accel > ${prev#* } )); then
        best[$i,$n]="$rate $accel"
      fi
    done
  done
done

echo
echo "| nodes | ${names[0]} | ${names[1]} | ${names[1]} / ${names[0]} |"
echo "|---|---|---|---|"
for n in "${sizes[@]}"; do
  read -r r0 a0 <<<"${best[0,$n]}"
  read -r r1 a1 <<<"${best[1,$n]}"
  ratio=$(awk -v a="$a1" -v b="$a0" 'BEGIN { printf "%.2f", a / b }')
  printf '| %s | %.2f M events/s, %sx | %.2f M events/s, %sx | %s |\n' \
    "$n" "$(awk -v r="$r0" 'BEGIN { print r / 1e6 }')" "$a0" \
    "$(awk -v r="$r1" 'BEGIN { print r / 1e6 }')" "$a1" "$ratio"
done

if [[ ${INSTRUCTIONS:-0} == 1 ]]; then
  command -v valgrind > /dev/null || { echo "INSTRUCTIONS=1 needs valgrind" >&2; exit 1; }
  echo
  echo "| nodes | instructions, ${names[0]} | ${names[1]} | ratio |"
  echo "|---|---|---|---|"
  for n in "${sizes[@]}"; do
    counts=()
    for i in 0 1; do
      out="$work/callgrind-$i-$n.out"
      counts+=("$(valgrind --tool=callgrind --callgrind-out-file="$out" "${bins[$i]}" bench --nodes "$n" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')")
    done
    awk -v n="$n" -v a="${counts[0]}" -v b="${counts[1]}" \
      'BEGIN { printf "| %s | %.2f G | %.2f G | %.2f |\n", n, a / 1e9, b / 1e9, b / a }'
  done
fi
