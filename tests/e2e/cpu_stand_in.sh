#!/usr/bin/env bash
# A stand-in for ddp_train on a GPU, used by gpu_train_rehearsal.sh only:
# --device cuda becomes --device cpu, and the start-up output says what a GPU
# run's says (backend nccl, device cuda, a GPU line for rank 0). It lets the
# CPU machines that run CI exercise gpu_train.sh's own logic (its runs, files,
# comparisons and patterns), which otherwise runs only where a GPU is lent.
# It proves nothing about the GPU path itself.
: "${DDP_TRAIN_REAL:?the ddp_train binary}"
args=()
on_gpu=0
previous=""
for arg in "$@"; do
  if [ "$previous" = --device ] && [ "$arg" = cuda ]; then
    arg=cpu
    on_gpu=1
  fi
  args+=("$arg")
  previous=$arg
done
[ "$on_gpu" = 1 ] || exec "$DDP_TRAIN_REAL" "${args[@]}"
"$DDP_TRAIN_REAL" "${args[@]}" | sed -e 's/backend mpi[^,]*, device cpu/backend nccl, device cuda/' \
  -e '0,/ ddp_train: /s/^\(.* ddp_train: .*\)$/\1\n[r0] rank 0: stand-in, local rank 0, GPU 0 (the CPU)/'
exit "${PIPESTATUS[0]}"
