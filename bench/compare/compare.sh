#!/usr/bin/env bash
# The paired comparison of docs/performance.md ("Against opm, deppy and our earlier code"):
# whole processes, A and B run alternately (the order swapped each round) so a machine that
# slows down slows both; the first round is a warm-up, then RUNS rounds are counted and the
# median wall time and peak RSS of each side printed, with B/A.
#
#   bench/compare/compare.sh [BASE_REV]
#
# A is this checkout's olm-resolve (a release build). B is, in turn:
#   * olm-resolve built at BASE_REV (default 8c27974e, the code of 2026-11-29 whose figures
#     the project recorded), from a git worktree of this repository;
#   * opm v1.73.0 built from its module (the Go module proxy), for validate and render;
#   * the deppy v0.3.0 harness of bench/compare/deppy (same problems, same picks checked), for
#     a one-shot solve; its in-process build and Solve times are printed beside our index and
#     resolve times (`olm-resolve --timings`).
# Builds are cached by version in ~/.cache/olm-rs/bench. Inputs: the real catalogs of
# crates/resolver/tests/data/fbc-samples/real and synthetic ones of 300 and 600 packages.
# Env: RUNS (default 7), SKIP (space-separated: base opm deppy).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
base=${1:-8c27974e}
runs=${RUNS:-7}
skip=" ${SKIP:-} "
cache=${OLM_BENCH_CACHE:-$HOME/.cache/olm-rs/bench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
log() { printf 'compare: %s\n' "$*" >&2; }

cd "$root"
log "building olm-resolve (this checkout)"
cargo build --release --locked -q -p olm-resolver --bin olm-resolve --example bench_inputs
ours=$root/target/release/olm-resolve

if [[ $skip != *" base "* ]]; then
  rev=$(git rev-parse --short=8 "$base")
  theirs=$cache/olm-resolve-$rev
  if [[ ! -x $theirs ]]; then
    log "building olm-resolve at $rev"
    git worktree add -f --detach "$work/base" "$rev" >/dev/null
    CARGO_TARGET_DIR=$cache/base-target cargo build --release -q \
      --manifest-path "$work/base/Cargo.toml" -p olm-resolver --bin olm-resolve
    cp "$cache/base-target/release/olm-resolve" "$theirs"
    git worktree remove --force "$work/base"
  fi
fi
if [[ $skip != *" opm "* ]]; then
  opm=$cache/opm-v1.73.0
  if [[ ! -x $opm ]]; then
    log "building opm v1.73.0 from the Go module proxy"
    dir=$(go mod download -json github.com/operator-framework/operator-registry@v1.73.0 |
      sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    # The tags of its Makefile: sqlite's JSON functions, and OpenPGP in Go instead of gpgme.
    (cd "$dir" && go build -tags json1,containers_image_openpgp -o "$opm" ./cmd/opm)
  fi
fi
if [[ $skip != *" deppy "* ]]; then
  deppy=$cache/deppy-bench-v0.3.0
  log "building the deppy v0.3.0 harness"
  go build -C "$root/bench/compare/deppy" -o "$deppy" .
fi

log "writing the inputs"
real=$root/crates/resolver/tests/data/fbc-samples/real
"$root/target/release/examples/bench_inputs" 300 "$work/s300" 50 500
"$root/target/release/examples/bench_inputs" 600 "$work/s600" 50 500

# now_ns; measure OUT CMD...: runs CMD (stdout to OUT), printing "seconds peak_kib".
measure() {
  local out=$1 start end rss; shift
  start=$(date +%s%N)
  /usr/bin/time -f '%M' -o "$work/rss" "$@" >"$out" 2>/dev/null || true
  end=$(date +%s%N)
  rss=$(tail -1 "$work/rss")
  echo "$(( (end - start) / 1000 )) $rss"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# pair NAME "A CMD" "B CMD": RUNS counted rounds, alternating.
pair() {
  local name=$1 a=$2 b=$3 i
  : >"$work/a" && : >"$work/b"
  for ((i = 0; i <= runs; i++)); do
    if ((i % 2)); then
      ra=$(measure "$work/out-a" $a); rb=$(measure "$work/out-b" $b)
    else
      rb=$(measure "$work/out-b" $b); ra=$(measure "$work/out-a" $a)
    fi
    if ((i > 0)); then echo "$ra" >>"$work/a"; echo "$rb" >>"$work/b"; fi
  done
  local ta tb ma mb
  ta=$(cut -d' ' -f1 "$work/a" | median); tb=$(cut -d' ' -f1 "$work/b" | median)
  ma=$(cut -d' ' -f2 "$work/a" | median); mb=$(cut -d' ' -f2 "$work/b" | median)
  awk -v n="$name" -v ta="$ta" -v tb="$tb" -v ma="$ma" -v mb="$mb" 'BEGIN {
    printf "| %s | %.1f ms | %.1f ms | %.2f | %.1f MiB | %.1f MiB |\n",
      n, ta / 1000, tb / 1000, tb / ta, ma / 1024, mb / 1024 }'
}

header() {
  echo
  echo "$1 ($runs paired runs, medians; B/A above 1 means olm-resolve is faster)"
  echo
  echo "| command and input | A: olm-resolve | B: $2 | B/A | A peak RSS | B peak RSS |"
  echo "|---|---|---|---|---|---|"
}

inputs=("real:$real" "synth-300:$work/s300/catalog" "synth-600:$work/s600/catalog")

if [[ $skip != *" base "* ]]; then
  header "Against olm-resolve at $rev" "olm-resolve $rev"
  for input in "${inputs[@]}"; do
    for cmd in validate render; do
      pair "$cmd ${input%%:*}" "$ours $cmd ${input#*:}" "$theirs $cmd ${input#*:}"
    done
  done
  for s in s300 s600; do
    for n in 50 500; do
      pair "solve $n on ${s#s}" "$ours $work/$s/problem-$n.yaml" "$theirs $work/$s/problem-$n.yaml"
    done
  done
fi
if [[ $skip != *" opm "* ]]; then
  header "Against opm v1.73.0" "opm"
  for input in "${inputs[@]}"; do
    pair "validate ${input%%:*}" "$ours validate ${input#*:}" "$opm validate ${input#*:}"
    pair "render ${input%%:*}" "$ours render ${input#*:}" "$opm render ${input#*:} -o json"
    # opm normalizes what it renders (it sorts relatedImages, for one); ours is catalogd's
    # all.json, the content as written. Both must hold the same blobs.
    blobs() { jq -c '[.schema, .package, .name]' | sort; }
    if ! cmp -s <("$ours" render "${input#*:}" | blobs) <("$opm" render "${input#*:}" -o json | blobs); then
      log "render ${input%%:*}: the two renderings hold different blobs"
    fi
  done
fi
if [[ $skip != *" deppy "* ]]; then
  echo
  echo "Against deppy v0.3.0 ($runs paired runs, medians; above 1 means olm-resolve is faster)"
  echo
  echo "| problem | olm-resolve index + resolve | deppy build + Solve | ratio | same picks |"
  echo "|---|---|---|---|---|"
  for s in s300 s600; do
    for n in 50 500; do
      pair "solve $n on ${s#s}" "$ours $work/$s/problem-$n.yaml" \
        "$deppy $work/$s/catalog $work/$s/requests-$n.txt 1" >>"$work/oneshot"
      ourt=$("$ours" --timings "$work/$s/problem-$n.yaml" 2>&1 >"$work/ours.json" | tail -1)
      dep=$("$deppy" "$work/$s/catalog" "$work/$s/requests-$n.txt" "$runs")
      same=no
      if cmp -s <(jq -c '[.bundles[].name] | unique' "$work/ours.json") <(echo "$dep" | jq -c '.bundles | unique'); then
        same=yes
      fi
      awk -v n="$n on ${s#s} packages" -v o="$ourt" -v b="$(echo "$dep" | jq '.build_ms')" \
        -v s="$(echo "$dep" | jq '.solve_ms')" -v same="$same" 'BEGIN {
        split(o, f, " "); ours = f[2] + f[4]
        printf "| %s | %.2f ms (%s + %s) | %.2f ms (%s + %s) | %.1f | %s |\n",
          n, ours, f[2], f[4], b + s, b, s, (b + s) / ours, same }'
    done
  done
  echo
  echo "| whole process | A: olm-resolve | B: deppy harness | B/A | A peak RSS | B peak RSS |"
  echo "|---|---|---|---|---|---|"
  cat "$work/oneshot"
fi
