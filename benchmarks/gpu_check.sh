#!/usr/bin/env bash
# The GPU check: build ddp with CUDA, run the GPU tests, and benchmark one GPU
# against PyTorch, in one go (on an H200 with 16 CPUs: build 30 s, tests 80 s,
# the comparison 204 s, 417 s with every stage). Everything it reports goes
# to $OUT (default ./gpu-check-out): gpu_check.log, the test log
# (testlog.txt), gpu_bench.md, and
# details.tar.gz with the rest (gather_bench.txt, allreduce_nccl.txt,
# allgather_nccl.txt, reducescatter_nccl.txt, ddp_bench_gpu.txt, the JSON and
# CSV files, the build and memcheck logs).
#
#   bash benchmarks/gpu_check.sh
#   TESTS_ONLY=1 bash benchmarks/gpu_check.sh    # a rerun: build what changed, GPU tests only
#   DEADLINE_S=450 bash benchmarks/gpu_check.sh  # end within 450 s (the device tool's limit)
#   STAGES="allreduce memcheck" bash benchmarks/gpu_check.sh  # the tests, then these stages only
#
# The stages after the tests: comparison (ddp_train against PyTorch), allreduce
# (the NCCL all-reduce table), ddp_bench, gathers (the all-gather and
# reduce-scatter tables), gather_bench, memcheck.
#
# With DEADLINE_S, each stage after the tests runs only when its time bound
# fits in what is left (a shorter bound when only part of it does), in the
# order of what matters most: the comparison with PyTorch, the NCCL tables,
# ddp_bench, then the rest. However the script ends, $OUT is packed into the
# four files named above.
#
# Needs CUDA with nvcc, NCCL, a C++ compiler, python3 with PyTorch, meson
# and ninja. ddp's Debian dependencies (Open MPI, Boost, GoogleTest, OpenBLAS,
# ...) and Fashion-MNIST come from the system, or from .deps/ when it exists
# (benchmarks/gpu_sysroot.sh packs them on a Debian machine, for GPU machines
# that have none of them and no network).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
started=$(date +%s)
stage() { echo "== $(($(date +%s) - started)) s: $*"; }
deadline=${DEADLINE_S:-0}
# bound SECONDS: prints the seconds a stage may take, SECONDS or what is left
# before the deadline less 5 s for packing; fails, saying so, when under 20 s
# would be left to it.
bound() {
  local left=$((deadline - ($(date +%s) - started) - 5))
  if [ "$deadline" = 0 ] || [ "$left" -ge "$1" ]; then echo "$1"; return 0; fi
  [ "$left" -ge 20 ] && { echo "$left"; return 0; }
  echo "== skipped: ${left} s left before DEADLINE_S=$deadline" >&2
  return 1
}
# The device tool brings back at most 8 files: the log, the test log and the
# comparison as they are, everything else in one archive, on any exit (a
# stage cut short by the tool's limit leaves its files too).
pack() {
  (cd "$OUT" && files=$(ls | grep -v -x -e gpu_check.log -e testlog.txt -e gpu_bench.md -e details.tar.gz) &&
    [ -n "$files" ] && tar -czf details.tar.gz --remove-files $files) 2> /dev/null
}
trap pack EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none MALLOC_PERTURB_=0
export PYTHONUNBUFFERED=1
# One node: without ssh or rsh, Open MPI's default launcher refuses to start.
command -v ssh > /dev/null || command -v rsh > /dev/null || export OMPI_MCA_plm=isolated

# meson and ninja may exist only as Python packages whose scripts are not
# on PATH. A script on PATH, not a shell
# function: `timeout` runs its command itself, and finds no function (the
# GPU tests exited 127 so, in a rehearsal).
if ! command -v meson > /dev/null && python3 -c 'import mesonbuild' 2> /dev/null; then
  meson_dir=$(mktemp -d)
  printf '#!/bin/sh\nexec python3 -m mesonbuild.mesonmain "$@"\n' > "$meson_dir/meson"
  chmod +x "$meson_dir/meson"
  export PATH=$meson_dir:$PATH
fi
if ! command -v ninja > /dev/null; then
  ninja_dir=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2> /dev/null) &&
    export PATH=$ninja_dir:$PATH
fi

# The toolkit is the one nvcc belongs to, unless CUDA_HOME names one:
# ddp's meson.build looks for NCCL and cuBLAS under CUDA_HOME (default
# /usr/local/cuda), and meson's CUDA dependency reads CUDA_PATH, so both are
# set alike when nvcc is elsewhere.
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc > /dev/null; then
  toolkit=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  [ -f "$toolkit/include/cuda_runtime.h" ] && export CUDA_HOME=$toolkit
fi
[ -n "${CUDA_HOME:-}" ] && export CUDA_PATH=${CUDA_PATH:-$CUDA_HOME}
cuda=${CUDA_HOME:-/usr/local/cuda}

stage "machine"
command -v meson > /dev/null || echo "no meson: the build will fail"
command -v ninja > /dev/null || echo "no ninja: the build will fail"
nvidia-smi -L 2>&1 | head -4
echo "kernel $(uname -r), $(nproc) CPUs, /dev/shm $(df -h --output=size /dev/shm 2>/dev/null | tail -1 | tr -d ' ')"
nvcc --version | tail -2
echo "CUDA toolkit: ${CUDA_HOME:-not found from nvcc}; $(for f in "$cuda"/lib*/libcublas.so.* \
  "$cuda"/lib*/libnccl.so*; do [ -e "$f" ] && readlink -f "$f"; done | sort -u | paste -sd' ')"
${CXX:-g++} --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'

if [ -f .deps/sysroot.tar.xz ]; then
  stage "unpacking .deps (Debian 12 dependencies) into /tmp/ddp-sysroot"
  S=/tmp/ddp-sysroot
  rm -rf "$S" && mkdir -p "$S"
  tar -C "$S" -xJf .deps/sysroot.tar.xz 2> /dev/null ||  # no xz: Python reads it too
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      .deps/sysroot.tar.xz "$S"
  lib=$S/usr/lib/x86_64-linux-gnu
  ln -sf orterun "$S/usr/bin/mpirun"
  export PATH=$S/usr/bin:$PATH
  export LD_LIBRARY_PATH=$lib:$S/lib/x86_64-linux-gnu:$lib/openblas-pthread:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$lib/openmpi/lib/pkgconfig:$S/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$S
  export OPAL_PREFIX=$S/usr OPAL_LIBDIR=$lib/openmpi/lib
  # Debian's PMIx has absolute compile-time directories: name each one.
  p=$lib/pmix2
  export PMIX_PREFIX=$p PMIX_EXEC_PREFIX=$p PMIX_LIBDIR=$p/lib PMIX_DATADIR=$p/share
  export PMIX_DATAROOTDIR=$p/share PMIX_PKGDATADIR=$p/share/pmix PMIX_PKGLIBDIR=$p/lib/pmix
  export OMPI_MCA_mca_base_component_path=$lib/openmpi/lib/openmpi3
  export BOOST_INCLUDEDIR=$S/usr/include BOOST_LIBRARYDIR=$lib
fi
[ -d .deps/fashion-mnist ] && export DDP_DATA_DIR=$PWD/.deps/fashion-mnist

# NCCL next to the toolkit, or from the nvidia-nccl Python wheel (found
# wherever it puts its header and library: the layout differs between the
# wheels for CUDA 12 and 13).
nccl_option=()
if ! ls "$cuda"/lib64/libnccl.so* "$cuda"/lib/libnccl.so* > /dev/null 2>&1; then
  wheels=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2> /dev/null)
  header=$(find $wheels -name nccl.h 2> /dev/null | head -1)
  library=$(find $wheels -name 'libnccl.so*' 2> /dev/null | sort | head -1)
  if [ -n "$header" ] && [ -n "$library" ]; then
    rm -rf /tmp/ddp-nccl && mkdir -p /tmp/ddp-nccl/lib
    ln -sfn "$(dirname "$header")" /tmp/ddp-nccl/include
    ln -sf "$library" /tmp/ddp-nccl/lib/libnccl.so
    nccl_option=(-Dnccl_home=/tmp/ddp-nccl)
    export LD_LIBRARY_PATH=$(dirname "$library"):${LD_LIBRARY_PATH:-}
    echo "NCCL from the Python wheel: $header, $library"
  else
    echo "no NCCL next to the toolkit ($cuda) nor in a Python wheel: the build will fail"
  fi
fi

stage "configure and build"
# A device machine stays warm for a while after a call and keeps ignored
# folders: a rerun after a fix builds only what changed (minutes of the
# session's device time saved). FRESH_BUILD=1 starts over.
if [ -f build-gpu/build.ninja ] && [ "${FRESH_BUILD:-0}" != 1 ]; then
  echo "build-gpu/ is kept from an earlier run on this machine: building what changed"
else
  rm -rf build-gpu
  meson setup build-gpu -Dcuda=enabled -Dwerror=false "${nccl_option[@]}" > "$OUT/meson-setup.log" 2>&1 ||
    { tail -40 "$OUT/meson-setup.log"; cp build-gpu/meson-logs/meson-log.txt "$OUT/" 2>/dev/null
      rm -rf build-gpu; exit 1; }
  grep -A12 '^  ddp' "$OUT/meson-setup.log"
fi
ninja -C build-gpu > "$OUT/build.log" 2>&1 || { grep -B2 -A8 -m5 'error' "$OUT/build.log"; exit 1; }

# Open MPI has not yet run on a device machine (some run under gVisor), and
# every stage below needs it: find a setting that starts two ranks and
# all-reduces, before spending the machine's minutes on tests that would all
# fail alike. Each try adds to the one before; the first that works stays
# exported for the stages below (meson's tests set only btl and pml).
stage "Open MPI on this machine: two ranks, one all-reduce"
mpi_try() {  # NP
  timeout 30 mpirun -q -np "$1" build-gpu/benchmarks/allreduce_bench --backend mpi -b 1K -e 1K \
    -n 2 -w 1 >> "$OUT/mpi_probe.log" 2>&1
}
mpi_works=""
added=""
for setting in "" OMPI_MCA_hwloc_base_binding_policy=none PMIX_MCA_gds=hash; do
  [ -n "$setting" ] && export "${setting?}" && added+="${added:+ }$setting"
  echo "== two ranks, defaults${setting:+ plus everything up to $setting}" >> "$OUT/mpi_probe.log"
  if mpi_try 2; then mpi_works=yes; break; fi
done
if [ -n "$mpi_works" ]; then
  echo "mpirun works${added:+ with $added}"
else
  echo "two ranks fail with every setting tried (mpi_probe.log in details.tar.gz):"
  tail -20 "$OUT/mpi_probe.log"
  echo "== one rank, defaults plus $added" >> "$OUT/mpi_probe.log"
  # The GPU runs are of one rank; shared memory between ranks may be what fails.
  if mpi_try 1; then echo "one rank works: the one-rank GPU stages may still run"; else
    echo "one rank fails too: the stages below will fail"; fi
fi

stage "GPU tests"
# Timeouts at 0.4 of meson's (gpu_train 240 s, the GPU gtest programs 120 s),
# so that a hang leaves time for the stages after it.
t=$(bound 900) || t=20
timeout "$t" meson test -C build-gpu device_choice cublas_library gpu_kernels_np1 nccl_np1 gpu_train \
  gpu_ddp_bench --print-errorlogs --num-processes 1 --timeout-multiplier 0.4 > "$OUT/tests.log" 2>&1
tests=$?
grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout):' "$OUT/tests.log"
cp build-gpu/meson-logs/testlog.txt "$OUT/testlog.txt" 2>/dev/null
# STAGES names the stages after the tests that run (default: all, in this
# order); TESTS_ONLY=1, none (a rerun after a fix that needs the tests'
# verdict alone).
stages=${STAGES-comparison allreduce ddp_bench gathers gather_bench memcheck}
[ "${TESTS_ONLY:-0}" = 1 ] && stages=""
if [ -z "$stages" ]; then
  stage "done (tests exit $tests; no stage after the tests asked for)"
  exit "$tests"
fi
wanted() { [[ " $stages " == *" $1 "* ]]; }

bench=0
if wanted comparison; then
  stage "one-GPU step time: ddp_train vs PyTorch"
  bench=1
  if t=$(bound 300); then
    # A run started just before the limit ends well inside the bound.
    timeout "$t" python3 benchmarks/gpu_bench.py --build build-gpu --repeats 3 \
      --markdown "$OUT/gpu_bench.md" --time-limit $((t > 90 ? t - 45 : t / 2))
    bench=$?
  fi
fi

if wanted allreduce; then
  stage "allreduce_bench --backend nccl (one GPU: the layer's cost over ncclAllReduce)"
  t=$(bound 120) && timeout "$t" mpirun -q -np 1 build-gpu/benchmarks/allreduce_bench --backend nccl \
    -b 8 -e 256M -f 4 -n 20 -w 5 --back-to-back 20 --csv "$OUT/allreduce_nccl.csv" |
    tee "$OUT/allreduce_nccl.txt"
fi

if wanted ddp_bench; then
  stage "ddp_bench --device cuda (one GPU: the Reducer on NCCL, caps side by side, profiles)"
  for profile in mlp resnet50 bert-base gpt2; do
    t=$(bound 60) && timeout "$t" mpirun -q -np 1 build-gpu/benchmarks/ddp_bench --device cuda \
      --profile "$profile" --steps 20 --warmup 3 --json "$OUT/ddp_bench_gpu_$profile.json" |
      tee -a "$OUT/ddp_bench_gpu.txt"
  done
fi

if wanted gathers; then
  stage "allreduce_bench --backend nccl --collective allgather, reducescatter (--shard-optimizer's)"
  for collective in allgather reducescatter; do
    t=$(bound 60) && timeout "$t" mpirun -q -np 1 build-gpu/benchmarks/allreduce_bench --backend nccl \
      -b 1M -e 256M -f 4 -n 20 -w 5 --collective "$collective" | tee "$OUT/${collective}_nccl.txt"
  done
fi

if wanted gather_bench; then
  stage "gather_bench: a batch gathered on the host, threads started per batch or kept"
  t=$(bound 60) && timeout "$t" build-gpu/benchmarks/gather_bench \
    --data-dir "${DDP_DATA_DIR:-/usr/share/datasets/fashion-mnist}" --batches 256,1024,4096 \
    --threads "$(nproc)" --calls 200 --rounds 3 | tee "$OUT/gather_bench.txt"
fi

if wanted memcheck && command -v compute-sanitizer > /dev/null; then
  stage "kernels under compute-sanitizer (memcheck; report only)"
  if t=$(bound 120); then
    timeout "$t" mpirun -q -np 1 compute-sanitizer --tool memcheck --print-limit 20 \
      build-gpu/tests/gpu_kernels_test > "$OUT/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
  fi
fi

stage "done (tests exit $tests, benchmark exit $bench)"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
