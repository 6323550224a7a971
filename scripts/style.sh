#!/usr/bin/env bash
# The style check (docs/coding-style.md): clang-format's layout on every C++
# file, and clang-tidy's naming check (.clang-tidy) on every C++ source of a
# configured build. The test suite runs it as the `style` test.
#
#   bash scripts/style.sh [BUILD_DIR]     # default: build
#
# Exit 0: clean. 1: the files and lines at fault are printed, with the
# command that fixes the layout. 77 (meson: skipped): clang-format 14 or
# clang-tidy is missing; Debian 12's packages clang-format and clang-tidy
# have them (scripts/test.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

# Another clang-format version lays some lines out otherwise: only 14's
# verdict is the one .clang-format was written against.
format=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" > /dev/null &&
    "$candidate" --version | grep -q 'version 14\.'; then
    format=$candidate
    break
  fi
done
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [ -z "$format" ] || [ -z "$tidy" ]; then
  echo "style: skipped: needs clang-format 14 and clang-tidy (apt-get install clang-format clang-tidy)"
  exit 77
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "style: $build/compile_commands.json not found: configure a build first (meson setup $build)"
  exit 1
fi

rc=0
mapfile -t files < <(find comm runtime trainer launcher tests benchmarks \
  \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f | sort)
unformatted=()
for f in "${files[@]}"; do
  "$format" --dry-run -Werror "$f" > /dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "style: ${#unformatted[@]} file(s) not laid out as .clang-format says; fix with:"
  echo "  $format -i ${unformatted[*]}"
  "$format" --dry-run "${unformatted[@]}" 2>&1 | head -40
  rc=1
fi
echo "style: layout of ${#files[@]} files checked by $("$format" --version | grep -o 'version [0-9.]*')"

# Naming: every C++ source the build compiles (the headers they include come
# along, .clang-tidy's HeaderFilterRegex). The two .cu files are left to
# review: clang 14 cannot parse this CUDA's headers.
mapfile -t sources < <(python3 - "$build/compile_commands.json" <<'PY'
import json, sys
print("\n".join(sorted({e["file"] for e in json.load(open(sys.argv[1]))
                        if e["file"].endswith(".cc")})))
PY
)
# Whatever clang-tidy prints besides its counts of warnings: a finding, or a
# file it could not parse. Either fails the check. Each clang-tidy's output
# is filtered before it meets the others': clang-tidy writes "12" and
# " warnings generated." in separate writes, and parallel runs sharing one
# pipe once interleaved them into a line the filter did not know (a red CI).
noise='^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$'
findings=$(cd "$build" && export NOISE="$noise" && printf '%s\n' "${sources[@]}" |
  xargs -P "$(nproc)" -n 4 sh -c '"$0" -p . --quiet "$@" 2>&1 | grep -v -E "$NOISE"; true' "$tidy")
if [ -n "$findings" ]; then
  echo "style: names that docs/coding-style.md does not allow (.clang-tidy), or sources clang-tidy could not read:"
  if grep -q -E 'error:|warning:' <<< "$findings"; then
    grep -E 'error:|warning:' <<< "$findings" | sed 's|[^ ]*/\.\./||' | sort -u | head -60
  else
    head -40 <<< "$findings"
  fi
  rc=1
fi
echo "style: names in ${#sources[@]} sources and their headers checked by $(basename "$tidy")"
exit $rc
