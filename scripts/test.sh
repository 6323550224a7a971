#!/usr/bin/env bash
# README command 2: install, build, and run the whole test suite
# (unit tests, tests under mpirun at np 1/2/4, whole runs of ddp_train).
# Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh clang-format clang-tidy  # and the style test's tools
rc=0
meson test -C build --print-errorlogs "$@" || rc=$?
# One closing line that any CI can read.
python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
for line in open(sys.argv[1]):
    result = json.loads(line)["result"]
    key = {"OK": "OK", "SKIP": "SKIP", "EXPECTEDFAIL": "OK"}.get(result, "FAIL")
    counts[key] += 1
print(f'{counts["OK"]} passed, {counts["FAIL"]} failed, {counts["SKIP"]} skipped')
PY
exit $rc
