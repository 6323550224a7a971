#!/usr/bin/env bash
# The whole test suite under sanitizers, in a build of its own:
#
#   bash scripts/sanitize.sh address     # AddressSanitizer + UndefinedBehaviorSanitizer + leaks
#   bash scripts/sanitize.sh thread      # ThreadSanitizer
#
# Extra arguments go to `meson test` (e.g. --suite mpi). Needs what
# scripts/test.sh installs; builds build-asan/ or build-tsan/ (CPU only:
# CUDA code is checked on a GPU by compute-sanitizer, benchmarks/gpu_check.sh),
# about 10 minutes on 2 cores, then runs the suite with every process writing its
# reports to a log directory, so that a report from a process whose output a
# test captures (a rank that was meant to fail, say) is not lost.
#
# Judged afterwards, from the logs:
#   - any AddressSanitizer error, UndefinedBehaviorSanitizer "runtime error"
#     or ThreadSanitizer warning fails the run;
#   - a leak fails the run only when one of its stack frames is in ddp's own
#     code. Open MPI keeps about 116 KiB in every process past MPI_Finalize,
#     allocated in plug-ins it has unloaded by then, so their frames cannot
#     be named and suppressed.
# A test can fail under a sanitizer and not otherwise: under ThreadSanitizer
# `install` builds a program against the instrumented library without the
# runtime, which crashes. So the verdict is the logs, and the tests that
# failed are printed for information.
set -uo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
shift || true
case $kind in
  address) build=build-asan sanitize=address,undefined ;;
  thread) build=build-tsan sanitize=thread ;;
  *) echo "usage: bash scripts/sanitize.sh address|thread [meson test arguments]" >&2; exit 2 ;;
esac
bash scripts/setup.sh > /dev/null || exit 1
if [ ! -f "$build/build.ninja" ]; then
  # -Werror off: GCC 12 warns about std::regex internals under sanitizers.
  meson setup "$build" -Dcuda=disabled -Db_sanitize=$sanitize -Db_lundef=false \
    -Dwerror=false -Dbuildtype=debugoptimized > /dev/null || exit 1
fi
ninja -C "$build" > "$build/ninja.log" 2>&1 || { tail -30 "$build/ninja.log"; exit 1; }
runtime=$([ "$kind" = thread ] && echo libtsan || echo libasan)
ldd "$build/launcher/ddp_train" | grep "$runtime" > /dev/null ||  # all of it read: no SIGPIPE under pipefail
  { echo "$build is not built with $runtime" >&2; exit 1; }

logs=$PWD/$build/sanitizer-logs
rm -rf "$logs" && mkdir -p "$logs"
here=$PWD
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:log_path=$logs/asan"
# A leak does not change the exit status, so a test goes on past it.
export LSAN_OPTIONS=exitcode=0
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
# Open MPI's libraries and plug-ins are not instrumented: what TSan infers
# inside them (locks it never saw taken, its progress engine's polling) is not
# ddp's. When two threads of a rank call MPI at once (two communicators, as
# a Reducer test does), either thread's progress call may deliver the
# other's message (the plug-ins copy it with memcpy), ordered by Open MPI's
# own atomics, which TSan does not see: a race between that copy and our
# read of the result is suppressed by its plug-in frame (race:mca_) only if
# TSan can restore the copy's stack, hence the longest history. (Plug-ins
# cannot be called_from_lib: Open MPI 4.1 unloads them at MPI_Finalize,
# and TSan stops when such a library goes.)
# A report is also not an exit status, so a test goes on past it.
printf '%s\n' 'called_from_lib:libmpi.so' 'called_from_lib:libopen-pal.so' \
  'called_from_lib:libopen-rte.so' 'race:libopenblas' 'race:mca_' 'mutex:mca_' \
  'race:libopen-pal.so' 'mutex:libopen-pal.so' 'deadlock:mca_' > "$build/tsan.supp"
# allocator_may_return_null: tests ask for impossible sizes on purpose (an
# OutOfMemoryError must name the tensor), as under AddressSanitizer.
export TSAN_OPTIONS="exitcode=0:second_deadlock_stack=1:history_size=7:allocator_may_return_null=1:log_path=$logs/tsan:suppressions=$here/$build/tsan.supp"
# More time, for meson's limits and the e2e tests' own (lib.sh): a
# ThreadSanitizer step of the default MLP took 30x the usual 10 ms, and a
# test's epoch of Fashion-MNIST (938 steps) 280 s against a bound of 60.
export DDP_TEST_TIME_SCALE=$([ "$kind" = thread ] && echo 8 || echo 4)
meson test -C "$build" --num-processes 1 -t "$DDP_TEST_TIME_SCALE" "$@" > "$build/test.log" 2>&1
grep -E '^ *[0-9]+/[0-9]+ ' "$build/test.log" | grep -v -E ' (OK|SKIP) ' || true
tail -7 "$build/test.log" | grep -E '^(Ok|Fail|Skipped|Timeout):' | tr '\n' ' '
echo

python3 - "$logs" "$here" <<'PY'
import os, re, sys
logs, here = sys.argv[1:3]
ours = re.compile(r"ddp::|" + re.escape(here) + r"/|\.\./(comm|runtime|trainer|launcher|benchmarks|tests)/")
problems, leaks_elsewhere = [], 0
for name in sorted(os.listdir(logs)):
    text = open(os.path.join(logs, name), errors="replace").read()
    # One report per block: split on the separator lines the runtimes print.
    for block in re.split(r"\n(?==+\n==\d+==|==\d+==ERROR|WARNING: ThreadSanitizer)", text):
        if "LeakSanitizer" in block:
            for leak in re.split(r"\n(?=(?:Direct|Indirect) leak)", block):
                if "leak of" not in leak:
                    continue
                # A frame ASan could not symbolize names only a module, and
                # after MPI_Finalize unloads Open MPI's plug-ins their
                # addresses can be put down to whatever module is nearest,
                # ddp's programs included: only symbolized frames count.
                if ours.search(re.sub(r"\([^()\s]+\+0x[0-9a-f]+\)", "", leak)):
                    problems.append((name, leak))
                else:
                    leaks_elsewhere += 1
        elif re.search(r"ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer", block):
            problems.append((name, block))
for name, block in problems[:10]:
    print(f"--- {name}\n{block.strip()[:3000]}\n")
print(f"sanitizer reports in ddp's code: {len(problems)} "
      f"({len(os.listdir(logs))} process logs in {logs}; "
      f"{leaks_elsewhere} leak reports with no frame in ddp's code)")
sys.exit(1 if problems else 0)
PY
