#!/usr/bin/env bash
# `meson install` ships ddp_train, ddp_restart, the library, its headers and ddp.pc; a
# separate program compiles and links against them through pkg-config and
# runs under mpirun.
. "$(dirname "$0")/lib.sh"
: "${MESON_BUILD_ROOT:?set by meson}" "${CONSUMER_SOURCE:?set by meson}"
root="$WORK/root"
DESTDIR="$root" meson install -C "$MESON_BUILD_ROOT" --no-rebuild --quiet
pc=$(find "$root" -name ddp.pc | head -n 1)
[ -n "$pc" ] || fail "no ddp.pc installed"
[ -x "$(find "$root" -name ddp_train -type f | head -n 1)" ] || fail "ddp_train not installed"
[ -x "$(find "$root" -name ddp_restart -type f | head -n 1)" ] || fail "ddp_restart not installed"
[ -f "$(find "$root" -path '*include/ddp/comm/communicator.h' | head -n 1)" ] || fail "headers not installed"
# The package was installed under $root (DESTDIR): point a copy of ddp.pc there.
mkdir -p "$WORK/pc"
sed "s|^prefix=|prefix=$root|" "$pc" > "$WORK/pc/ddp.pc"
pc_() { PKG_CONFIG_PATH="$WORK/pc" pkg-config "$@" ddp; }
flags=$(pc_ --cflags --libs)
libdir=$(pc_ --variable=libdir)
# shellcheck disable=SC2086
c++ -std=c++20 "$CONSUMER_SOURCE" $flags -o "$WORK/consumer" || fail "consumer does not build against the installed package"
LD_LIBRARY_PATH="$libdir" timeout 60 mpirun -q -x LD_LIBRARY_PATH -np 2 "$WORK/consumer" || fail "consumer failed"
echo "install: ok"
