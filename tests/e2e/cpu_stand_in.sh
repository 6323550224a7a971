#!/usr/bin/env bash
# A stand-in for ddp_train or ddp_bench on a GPU, used by the rehearsals
# (gpu_train_rehearsal.sh, gpu_ddp_bench_rehearsal.sh) only: --device cuda
# becomes --device cpu, and what the run says of itself reads as a GPU run's
# (start-up lines: backend nccl, device cuda, a GPU line for rank 0; a --json
# report: backend and device). It lets the CPU machines that run CI exercise
# the GPU tests' own logic (their runs, files, comparisons and patterns),
# which otherwise runs only where a GPU is lent. It proves nothing about the
# GPU path itself.
: "${STAND_IN_FOR:?the ddp_train or ddp_bench binary}"
args=()
on_gpu=0
previous=""
json=""
for arg in "$@"; do
  if [ "$previous" = --device ] && [ "$arg" = cuda ]; then
    arg=cpu
    on_gpu=1
  fi
  [ "$previous" = --json ] && json=$arg
  args+=("$arg")
  previous=$arg
done
[ "$on_gpu" = 1 ] || exec "$STAND_IN_FOR" "${args[@]}"
"$STAND_IN_FOR" "${args[@]}" | sed -e 's/backend mpi[^,]*, device cpu/backend nccl, device cuda/' \
  -e '0,/ ddp_train: /s/^\(.* ddp_train: .*\)$/\1\n[r0] rank 0: stand-in, local rank 0, GPU 0 (the CPU)/'
code=${PIPESTATUS[0]}
if [ -n "$json" ] && [ -f "$json" ]; then
  sed -i -e 's/^ "backend": "mpi",$/ "backend": "nccl",/' -e 's/^ "device": "cpu",$/ "device": "cuda",/' "$json"
fi
exit "$code"
