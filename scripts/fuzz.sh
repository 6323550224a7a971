#!/usr/bin/env bash
# Fuzzes one of tests/fuzz's targets with libFuzzer, in a build of its own:
#
#   bash scripts/fuzz.sh TARGET [SECONDS] [libFuzzer arguments]
#
# TARGET: safetensors | checkpoint | options | config | idx (tests/fuzz/*_fuzz.cc say
# what each takes). Installs clang and its libFuzzer runtime beside what
# scripts/test.sh installs, builds build-fuzz/ (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, CPU only, every object instrumented for
# coverage; only the target and ddp_train), then fuzzes for SECONDS (default
# 300) from tests/fuzz/corpus/TARGET, keeping what it finds in
# build-fuzz/corpus/TARGET for the next run. The options and config targets
# get ddp_train's option names as a dictionary (options: DDP_* names too).
#
# A crash, a sanitizer report, a hang (10 s) or a leak stops it, with the
# input in build-fuzz/ (crash-*, timeout-*, leak-*, oom-*). Once fixed, the
# input belongs in tests/fuzz/corpus/TARGET under a name that says what it
# was: every build's fuzz_corpus_TARGET test replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
case $target in
  safetensors | checkpoint | options | config | idx) ;;
  *) echo "usage: bash scripts/fuzz.sh safetensors|checkpoint|options|config|idx [SECONDS] [libFuzzer arguments]" >&2
     exit 2 ;;
esac
seconds=${2:-300}
shift $(($# < 2 ? $# : 2))
bash scripts/setup.sh clang libclang-rt-14-dev > /dev/null
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ meson setup "$build" -Dfuzzing=enabled -Dcuda=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized > /dev/null
fi
ninja -C "$build" "tests/fuzz/${target}_fuzz" launcher/ddp_train > "$build/ninja.log" 2>&1 ||
  { tail -30 "$build/ninja.log"; exit 1; }
corpus=$build/corpus/$target
mkdir -p "$corpus"
extra=()
if [ "$target" = options ] || [ "$target" = config ]; then
  dashes=$([ "$target" = options ] && echo -- || true)  # a config file's keys have none
  "$build/launcher/ddp_train" --help | grep -o -- '--[a-z0-9-]*' | sort -u |
    sed "s/^--\(.*\)/\"$dashes\1\"/" > "$build/$target.dict"
  if [ "$target" = options ]; then  # the DDP_* variables too
    "$build/launcher/ddp_train" --help | grep -o -- '--[a-z0-9-]*' | sort -u |
      sed 's/^--//; s/-/_/g; s/.*/"DDP_\U&\E="/' >> "$build/$target.dict"
  fi
  extra+=(-dict="$build/$target.dict")
fi
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
exec "$build/tests/fuzz/${target}_fuzz" "$corpus" "tests/fuzz/corpus/$target" \
  -max_total_time="$seconds" -timeout=10 -artifact_prefix="$build/" "${extra[@]}" "$@"
