#!/usr/bin/env bash
# scripts/mutants.sh — mutation testing of the oracle itself (issue 37):
# cargo-mutants (pinned below, installed from crates.io when missing)
# changes one operator, arm or return value at a time and runs the tests
# meant to catch it; a mutant no test fails on ("missed") is a wrong
# specification, judge or write path our tests would accept.
#
# Three areas, each cut into groups, and each group run with its own
# tests (docs/TESTING.md, "Mutation testing", has the table):
#   model   model/src, the specification (but accept.rs and trace.rs)
#   judges  the trace checker (model/src/trace.rs, accept.rs), the oracle's
#           crash envelope and lockstep comparison (oracle/src), `nilref
#           check` (impl/src/check), the campaigns' judges (cli/src/campaign)
#   core    impl's bmap, segctor, recovery, dat, alloc, cpfile, sufile
#
# Usage: scripts/mutants.sh [--shard I/N] [--list] [--timeout S]
#                           [--re REGEX] [--exclude-re REGEX] [AREA|PATH...]
#   AREA    model, judges or core (default: all three)
#   PATH    a file or folder inside them: only its mutants, with its group's
#           tests (e.g. model/src/fs/namei.rs)
#   --shard I/N  run the I-th (from 0) of N round-robin slices of every
#           group (a CI matrix, or a sample: 0/10 is every tenth mutant)
#   --list  print each group's mutant count and test command; run nothing
#   --timeout  per-mutant test timeout in seconds (default: per group);
#           the build timeout is 600 s
#   --re REGEX  only mutants whose name matches (cargo mutants --re; it
#           keeps "delete field" mutants whatever their name: add
#           --exclude-re to drop them)
#   --exclude-re REGEX  not the mutants whose name matches
# Results: target/mutants/GROUP/mutants.out (missed.txt, caught.txt,
# timeout.txt, unviable.txt, outcomes.json, a log per mutant), and one
# figures line per group on stdout and in target/mutants/figures.tsv. The
# script fails if any mutant was missed or timed out.
#
# The mutants are applied in place (`--in-place`) so that each build
# reuses this tree's target directory: a copy of the tree would first
# rebuild the whole workspace. cargo-mutants puts every file back after
# each mutant, and runs one mutant at a time; do not edit the tree while
# it runs. Incremental builds keep a mutant of the model to about 10 s of
# build and a mutant of impl to about 30 s (docs/TESTING.md).
set -euo pipefail
shopt -s globstar nullglob
cd "$(dirname "$0")/.."

MUTANTS_VERSION=27.1.0

shard= list=0 timeout= re= xre= sel=()
while [ $# -gt 0 ]; do
  case $1 in
    --shard) shard=$2; shift 2 ;;
    --list) list=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --re) re=$2; shift 2 ;;
    --exclude-re) xre=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    -*) sed -n '16,29p' "$0" >&2; exit 2 ;;
    *) sel+=("${1%/}"); shift ;;
  esac
done
[ ${#sel[@]} -gt 0 ] || sel=(model judges core)

if ! cargo mutants --version 2>/dev/null | grep -qx "cargo-mutants $MUTANTS_VERSION"; then
  cargo install cargo-mutants --version "$MUTANTS_VERSION" --locked
fi

# The model's own tests (every file in model/tests, unit tests with --lib).
model_tests=(--lib)
for f in model/tests/*.rs; do model_tests+=(--test "$(basename "$f" .rs)"); done

# Each group: name, area, package mutated, test packages, files, tests
# (cargo test arguments), test timeout (s). A file belongs to the first
# group that lists it.
groups=()
group() { groups+=("$1"); }
declare -A g_area g_pkg g_tpkgs g_files g_tests g_timeout

def() {
  local name=$1
  g_area[$name]=$2 g_pkg[$name]=$3 g_tpkgs[$name]=$4 g_files[$name]=$5 g_timeout[$name]=$6
  shift 6
  g_tests[$name]="$*"
  group "$name"
}

# The specification: its own tests (the kernel traces in model/traces are
# model/tests/kernel_traces.rs), lockstep against impl, the crash envelope.
def judge-trace judges nilfs-model "nilfs-model nilfs-conformance" \
  "model/src/trace.rs model/src/accept.rs" 120 \
  "${model_tests[@]}" --test lockstep --test crash_envelope
def model model nilfs-model "nilfs-model nilfs-conformance" \
  "$(ls model/src/**/*.rs | grep -v -e '^model/src/trace.rs$' -e '^model/src/accept.rs$' | tr '\n' ' ')" 120 \
  "${model_tests[@]}" --test lockstep --test crash_envelope
# The oracle crate: lockstep's comparison and the crash envelope's judge,
# with the known-bad implementation that must fail them (planted-bug).
def judge-oracle judges nilfs-oracle "nilfs-oracle nilfs-conformance planted-bug" \
  "oracle/src/crash.rs oracle/src/lockstep.rs oracle/src/check.rs" 180 \
  --lib --test lockstep --test crash_envelope --test oracle --test undecided
# nilref check: its unit tests, the check corpus (every code, each from a
# planted corruption), the fuzz corpora's replay (the image targets'
# inputs, among them findings `check` must report: regress-005) and the
# read faults (a check that fails each of its reads in turn).
def judge-check judges nilfs-impl "nilfs-impl nilfs-conformance" \
  "$(ls impl/src/check/*.rs | tr '\n' ' ')" 180 \
  --lib --test check_corpus --test fuzz_corpus --test read_faults
# The campaigns' judges: their unit tests in the nilref binary, with the
# peer tier on (GRUB's reader and blkid run in some of them; see below).
def judge-campaign judges nilref "nilref" \
  "cli/src/campaign/common/problem.rs cli/src/campaign/crash/judge.rs cli/src/campaign/crash/envelope.rs cli/src/campaign/grub.rs" 180 \
  --bin nilref
# impl's core, each part with the tests that exercise it, and lockstep.
def core-bmap core nilfs-impl "nilfs-impl nilfs-conformance" \
  "$(ls impl/src/bmap/**/*.rs | tr '\n' ' ')" 180 \
  --lib --test bmap_write --test readahead --test cached_read --test fs_write --test lockstep
def core-segctor core nilfs-impl "nilfs-impl nilfs-conformance" \
  "$(ls impl/src/segctor/*.rs | tr '\n' ' ')" 240 \
  --lib --test segctor_layout --test construction_order --test construction_abort \
  --test fs_write --test crash --test gc --test mdt_ops --test lockstep --test crash_envelope
def core-recovery core nilfs-impl "nilfs-impl nilfs-conformance" \
  "impl/src/recovery.rs" 240 \
  --lib --test crash --test recovery_flags --test sb_policy --test sb_fallback --test crash_envelope --test lockstep
def core-meta core nilfs-impl "nilfs-impl nilfs-conformance" \
  "impl/src/dat.rs impl/src/alloc.rs impl/src/cpfile.rs impl/src/sufile.rs" 180 \
  --lib --test mdt_ops --test mdt_props --test gc --test fs_write --test lockstep

# Which files of group $1 the selection takes.
selected_files() {
  local g=$1 f s out=()
  for f in ${g_files[$g]}; do
    for s in "${sel[@]}"; do
      case $s in
        model|judges|core) [ "$s" = "${g_area[$g]}" ] || continue ;;
        *) [ "$s" = "$f" ] || [[ $f == "$s"/* ]] || continue ;;
      esac
      out+=("$f")
      break
    done
  done
  echo "${out[@]}"
}

mkdir -p target/mutants
figures=target/mutants/figures.tsv
[ -f "$figures" ] || printf 'group\tarea\tshard\tmutants\tcaught\tmissed\ttimeout\tunviable\twall_s\tbuild_s\ttest_s\n' >"$figures"
bad=0 ran=0
for g in "${groups[@]}"; do
  read -ra files <<<"$(selected_files "$g")"
  [ ${#files[@]} -gt 0 ] || continue
  ran=1
  args=(--in-place --baseline skip --package "${g_pkg[$g]}"
        --build-timeout 600 --timeout "${timeout:-${g_timeout[$g]}}")
  for f in "${files[@]}"; do args+=(--file "$f"); done
  for p in ${g_tpkgs[$g]}; do args+=(--test-package "$p"); done
  # --cargo-arg, not --cargo-test-arg: the build phase (`cargo test
  # --no-run`) then builds only these targets too.
  for a in ${g_tests[$g]}; do args+=("--cargo-arg=$a"); done
  [ -z "$shard" ] || args+=(--shard "$shard" --sharding round-robin)
  [ -z "$re" ] || args+=(--re "$re")
  [ -z "$xre" ] || args+=(--exclude-re "$xre")
  if [ $list = 1 ]; then
    n=$(cargo mutants --list "${args[@]}" | wc -l)
    echo "$g ($n mutants): cargo mutants ${args[*]}"
    continue
  fi
  # The campaigns' judges are tested with the real GRUB and blkid (the
  # peer tier): a mutant must not count as caught because a peer is
  # missing, so their tests must pass unmutated first.
  genv=()
  if [ "$g" = judge-campaign ]; then
    genv=(NILFS_PEERS=1)
    if ! NILFS_PEERS=1 cargo test -q -p nilref --bin nilref -- a_workload_through_the_default_grub \
         blkid_probes_every_crash_state >&2; then
      echo "mutants.sh: judge-campaign needs the fetched peers: nilref peers fetch grub blkid" >&2
      exit 2
    fi
  fi
  out=target/mutants/$g${shard:+-${shard/\//of}}${re:+-re}
  echo "== $g: cargo mutants ${args[*]} --output $out" >&2
  # A proptest failure under a mutant is saved in a .proptest-regressions
  # file of the tree: those the run touches are put back afterwards, those
  # it makes removed.
  regress=$(git ls-files '*.proptest-regressions')
  made_before=$(git ls-files --others --exclude-standard '*.proptest-regressions')
  start=$(date +%s)
  env "${genv[@]}" cargo mutants "${args[@]}" --output "$out" >&2 || true
  wall=$(($(date +%s) - start))
  # shellcheck disable=SC2086
  git checkout --quiet -- $regress
  for f in $(git ls-files --others --exclude-standard '*.proptest-regressions'); do
    grep -qxF "$f" <<<"$made_before" || rm -f "$f"
  done
  j=$out/mutants.out/outcomes.json
  line=$(jq -r --arg g "$g" --arg a "${g_area[$g]}" --arg s "${shard:-all}" --arg w "$wall" '
    [.outcomes[] | select(.scenario != "Baseline")] as $m |
    [$g, $a, $s, ($m | length),
     ([$m[] | select(.summary == "CaughtMutant")] | length),
     ([$m[] | select(.summary == "MissedMutant")] | length),
     ([$m[] | select(.summary == "Timeout")] | length),
     ([$m[] | select(.summary == "Unviable")] | length),
     $w,
     ([$m[].phase_results[] | select(.phase == "Build") | .duration] | add // 0 | floor),
     ([$m[].phase_results[] | select(.phase == "Test") | .duration] | add // 0 | floor)]
    | map(tostring) | join("\t")' "$j")
  echo "$line" | tee -a "$figures"
  read -r _ _ _ _ _ missed tout _ <<<"$line"
  [ "$missed" = 0 ] && [ "$tout" = 0 ] || bad=1
done
[ $ran = 1 ] || { echo "mutants.sh: nothing selected by: ${sel[*]}" >&2; exit 2; }
exit $bad
