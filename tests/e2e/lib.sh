# Shared set-up for the end-to-end tests: paths from meson, mpirun as root,
# a private temp dir removed on exit, and small assertion helpers.
# Every mpirun is bounded by `timeout`, so a hang fails the test instead of CI.
set -euo pipefail
: "${DDP_TRAIN:?set by meson}" "${COMPARE_WEIGHTS:?set by meson}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # works in containers without CMA
# Thread counts from the caller's environment would override each rank's
# share (Note [Threads per rank]); the tests that want them set them.
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FMNIST=${DDP_DATA_DIR:-/usr/share/datasets/fashion-mnist}  # ddp_train reads DDP_DATA_DIR too

fail() { echo "FAIL: $*" >&2; exit 1; }
# exits_with CODE OUTFILE COMMAND...: runs COMMAND with its stdout and stderr
# in OUTFILE, and fails unless it exits CODE.
exits_with() {
  local want=$1 out=$2 code
  shift 2
  set +e; "$@" > "$out" 2>&1; code=$?; set -e
  [ "$code" = "$want" ] || fail "exit $code, not $want, from $*: $(tail -5 "$out")"
}
# For tests that need scarce hardware (a GPU lent for minutes), where one run
# should report every fault rather than the first:
#   section NAME FUNCTION [ARGS...]: runs FUNCTION in a subshell with errexit,
#     so a failing command or `fail` ends that section only; prints NAME with
#     its time, or counts it as failed;
#   sections_done: fails naming the failed sections, if any.
FAILED_SECTIONS=()
section() {
  local name=$1 code started=$SECONDS
  shift
  set +e
  ( set -e; "$@" )
  code=$?
  set -e
  if [ "$code" = 0 ]; then
    echo "ok: $name ($((SECONDS - started)) s)"
  else
    FAILED_SECTIONS+=("$name")
    echo "FAIL: section '$name' (exit $code, $((SECONDS - started)) s)" >&2
  fi
}
sections_done() {
  [ ${#FAILED_SECTIONS[@]} = 0 ] ||
    fail "${#FAILED_SECTIONS[@]} section(s) failed: $(printf "'%s', " "${FAILED_SECTIONS[@]}" | sed 's/, $//')"
}
# Under a sanitizer every process runs several times slower, and
# scripts/sanitize.sh sets DDP_TEST_TIME_SCALE to stretch the bounds on
# whole runs (as it stretches meson's with -t).
TIME_SCALE=${DDP_TEST_TIME_SCALE:-1}
# run NP [ddp_train args...]: quiet mpirun under a bound of RUN_TIMEOUT
# seconds (default 120) x TIME_SCALE
run() {
  local np=$1; shift
  timeout "$((${RUN_TIMEOUT:-120} * TIME_SCALE))" mpirun -q -np "$np" "$DDP_TRAIN" "$@"
}
# ends_with FILE KEY=VALUE|KEY~REGEX...: FILE (a --metrics file) ends with a
# run's end line (Note [The run's last --metrics line]) holding these
# values, as Python prints them (JSON's null: null), or values matching
# these Python regular expressions (re.search).
ends_with() {
  python3 - "$@" <<'PY' || fail "$1 does not end with the end line ${*:2}: $(tail -1 "$1")"
import json, re, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert "ended_by" in end, end
for pair in sys.argv[2:]:
    match = re.match(r"([a-z_]+)([=~])(.*)", pair, re.S)
    key, how, value = match.groups()
    got = end.get(key, "<absent>")
    text = "null" if got is None else str(got)
    assert text == value if how == "=" else re.search(value, text), (key, got, value)
PY
}
need_fmnist() { [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $FMNIST"; exit 77; }; }
# skip_without_cuda CODE ERRFILE: after a --device cuda probe that exited
# CODE with its stderr in ERRFILE. When it found no CUDA device (or no CUDA in
# this build), checks that it said so in one line with exit 2, and exits 77
# (skipped); otherwise returns.
skip_without_cuda() {
  grep -q -e "no CUDA device is visible" -e "built without CUDA" "$2" || return 0
  [ "$1" = 2 ] || fail "--device cuda without a GPU exited $1, not 2"
  [ "$(wc -l < "$2")" = 1 ] || fail "expected one error line: $(cat "$2")"
  echo "SKIP: no CUDA device ($(cat "$2"))"
  exit 77
}
# children PID: the PIDs of PID's child processes (from /proc; no procps needed)
children() { cat /proc/"$1"/task/*/children 2> /dev/null; }
# descendants PID: every process under PID, parents before their children.
descendants() {
  local p
  for p in $(children "$1"); do
    echo "$p"
    descendants "$p"
  done
}
# await_checkpoint DIR [N]: waits (at most 30 s x TIME_SCALE) until DIR holds
# N (default 1) complete checkpoints; fails if it never does.
await_checkpoint() {
  for _ in $(seq $((600 * TIME_SCALE))); do
    [ "$(ls "$1" 2> /dev/null | grep -c '^checkpoint-.*safetensors$')" -ge "${2:-1}" ] && return 0
    sleep 0.05
  done
  fail "no ${2:-1} checkpoint(s) in $1 after $((30 * TIME_SCALE)) s: $(ls "$1" 2> /dev/null)"
}
# stop_step LOG DIR SIGNAL WHAT: the step after which LOG says the ranks
# stopped for SIGNAL; fails unless they did and DIR holds that step's
# checkpoint. WHAT names the cause in the failure message.
stop_step() {
  local stopped step
  stopped=$(grep -o "stopped by SIG[A-Z0-9]* (signal $3) after step [0-9]*" "$1") ||
    fail "no graceful stop after $4: $(tail -5 "$1")"
  step=${stopped##* }
  [ -f "$(printf '%s/checkpoint-%09d.safetensors' "$2" "$step")" ] ||
    fail "no checkpoint at the stop after $4 (step $step): $(ls "$2")"
  echo "$step"
}
# rank_pids JOB LOG N: waits (at most 20 s) until LOG shows training has
# started and mpirun JOB has N rank processes; prints their PIDs.
rank_pids() {
  local job=$1 log=$2 n=$3 ranks=""
  for _ in $(seq 400); do
    grep -q "reducer:" "$log" 2> /dev/null &&
      ranks=$(for launcher in $(children "$job"); do children "$launcher"; done)
    [ "$(echo $ranks | wc -w)" = "$n" ] && break
    sleep 0.05
  done
  echo $ranks
}
