#!/usr/bin/env bash
# Packs what benchmarks/gpu_check.sh needs on a GPU machine that has CUDA,
# NCCL, a C++ compiler, Python with PyTorch, meson and ninja, but none of
# ddp's Debian dependencies and no network (the device machines lent to this
# project). Run here, on Debian 12 with apt:
#
#   bash benchmarks/gpu_sysroot.sh        # writes .deps/ (git-ignored)
#
# .deps/sysroot.tar.xz holds Debian 12's Open MPI (runtime, mpirun and
# headers), Boost.Program_options (only the headers ddp includes), GoogleTest,
# OpenBLAS, zlib and nlohmann-json headers, and pkgconf, unpacked with
# `dpkg -x` (no maintainer scripts) and stripped of static libraries and
# documentation; .deps/fashion-mnist/ holds the dataset's four files. The
# device tool carries .deps (name it in `carry`); gpu_check.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .git/info ]; then grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >> .git/info/exclude; fi
rm -rf .deps && mkdir -p .deps/debs .deps/fashion-mnist
packages=(
  # Open MPI 4.1 and what its libraries and plugins load
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1
  libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libpsm-infinipath1 libpsm2-2 libgfortran5
  libquadmath0 libatomic1 libudev1 libuuid1 libltdl7
  # the rest of ddp's build dependencies
  libboost-program-options1.74.0 libboost-program-options1.74-dev libboost1.74-dev
  libboost-program-options-dev libgtest-dev libopenblas0 libopenblas0-pthread libopenblas-dev
  libopenblas-pthread-dev zlib1g-dev nlohmann-json3-dev pkgconf pkgconf-bin libpkgconf3
)
(cd .deps/debs && apt-get download "${packages[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for deb in .deps/debs/*.deb; do dpkg -x "$deb" "$root"; done
rm -rf .deps/debs
# Only the Boost headers ddp's sources include (listed by the compiler).
boost_used=$(g++ -std=c++20 -H -fsyntax-only -I. -I"$root/usr/include" launcher/options.cc 2>&1 |
  grep -o "$root/usr/include/boost/[^ ]*" | sort -u; echo "$root/usr/include/boost/version.hpp")
mv "$root/usr/include/boost" "$root/boost.all"
for header in $boost_used; do
  relative=${header#"$root"/usr/include/boost/}
  mkdir -p "$root/usr/include/boost/$(dirname "$relative")"
  cp "$root/boost.all/$relative" "$root/usr/include/boost/$relative"
done
rm -rf "$root/boost.all"
find "$root" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" \
  "$root/usr/lib/x86_64-linux-gnu/fortran" "$root"/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack*
tar -C "$root" -cJf .deps/sysroot.tar.xz .
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  cp /usr/share/datasets/fashion-mnist/*.gz .deps/fashion-mnist/
else
  data=$(mktemp -d)
  (cd "$data" && apt-get download dataset-fashion-mnist > /dev/null 2>&1 && dpkg -x ./*.deb .)
  cp "$data"/usr/share/datasets/fashion-mnist/*.gz .deps/fashion-mnist/
  rm -rf "$data"
fi
du -sh .deps/*
