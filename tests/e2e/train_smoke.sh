#!/usr/bin/env bash
# One real epoch on Fashion-MNIST at np=2: learns (test accuracy >= 80%),
# writes the metrics file, and --init-from continues from saved weights; the
# threads per rank follow the launcher's CPU binding, or OMP_NUM_THREADS.
. "$(dirname "$0")/lib.sh"
need_fmnist
run 2 --epochs 1 --threads 1 --metrics "$WORK/metrics.jsonl" --save-model "$WORK/m.safetensors" > "$WORK/out"
cat "$WORK/out"
grep -q "ddp_train: 2 ranks on 1 node" "$WORK/out" || fail "no start-up summary"
python3 - "$WORK/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 2, lines
m, end = lines
# The run's end (Note [The run's last --metrics line]): keys of its own only.
assert end["ended_by"] == "epochs" and end["exit_code"] == 0, end
assert end["last_step"] == end["planned_steps"] == 469 and end["run_time_s"] > 0, end
assert end["model"].endswith("/m.safetensors") and "checkpoint" not in end, end
assert not {"epoch", "train_loss", "test_loss", "loss", "global_step"} & set(end), end
for key in ("epoch", "train_loss", "test_loss", "test_accuracy", "samples_per_s", "wall_time_s", "step_ms"):
    assert key in m, key
assert "best" not in m, m  # judged only for --save-best and --early-stop
assert m["test_samples"] == 10000, m
assert m["steps"] == m["steps_in_epoch"] == 469, m  # 60000 / (64 x 2), rounded up
assert m["test_accuracy"] >= 0.80, m
print("accuracy", m["test_accuracy"])
PY
# Starting from the saved weights with a negligible learning rate keeps them.
run 2 --init-from "$WORK/m.safetensors" --max-steps 1 --lr 1e-12 --momentum 0 \
  --save-model "$WORK/again.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/m.safetensors" "$WORK/again.safetensors" --rtol 1e-6 > /dev/null \
  || fail "--init-from did not start from the saved weights"
# The ETA counts the steps --max-steps leaves, not the rest of the epoch:
# 5 steps, not 933, at the step time the same line shows (about 10 ms, or
# hundreds under a sanitizer), with a second for rounding.
run 1 --max-steps 10 --log-every 5 --threads 1 > "$WORK/eta.out"
python3 - "$WORK/eta.out" <<'PY' || fail "the ETA ignores --max-steps: $(grep 'step 5/' "$WORK/eta.out")"
import re, sys
line = next(l for l in open(sys.argv[1]) if "step 5/938 " in l)
eta = re.search(r"ETA (?:(\d+)m)?(\d+)s ", line)
seconds = int(eta.group(1) or 0) * 60 + int(eta.group(2))
step_ms = float(re.search(r"\| step ([0-9.]+) ms", line).group(1))
assert seconds <= 2 * 5 * step_ms / 1000 + 1, (seconds, step_ms)
PY
# Threads per rank follow the CPUs a rank may run on (Note [Threads per
# rank]): mpirun -np 1 binds the rank to one core, --bind-to none does not.
cpus=$(nproc)
tiny=(--dataset synthetic --synthetic-samples 256 --epochs 1 --max-steps 1)
run 1 "${tiny[@]}" > "$WORK/bound.out" 2>&1
grep -q "(stopped by --max-steps after step 1 of 4)" "$WORK/bound.out" ||
  fail "a partial epoch's line does not say why: $(grep train_loss "$WORK/bound.out")"
grep -q "device cpu (1 BLAS thread per rank)" "$WORK/bound.out" ||
  fail "a rank bound to one core does not run one thread: $(head -3 "$WORK/bound.out")"
# OpenBLAS's kernels are named, fitted to a CPU newer than the library
# (Note [OpenBLAS kernels on CPUs newer than the library]); the user's
# OPENBLAS_CORETYPE is kept, and on a CPU with AVX2 the line says what it costs.
OPENBLAS_CORETYPE=Prescott timeout $((120 * TIME_SCALE)) mpirun -q -x OPENBLAS_CORETYPE -np 1 "$DDP_TRAIN" \
  "${tiny[@]}" > "$WORK/prescott.out" 2>&1
narrower=""
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  narrower=" (OPENBLAS_CORETYPE=Prescott: less than AVX2 kernels on a CPU with AVX[-0-9A-Z ]*)"
fi
grep -q "device cpu (1 BLAS thread per rank), OpenBLAS [0-9.]*, Prescott kernels$narrower$" \
  "$WORK/prescott.out" || fail "OPENBLAS_CORETYPE not kept: $(head -1 "$WORK/prescott.out")"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  env -u OPENBLAS_CORETYPE timeout $((120 * TIME_SCALE)) mpirun -q -np 1 "$DDP_TRAIN" "${tiny[@]}" \
    > "$WORK/fitted.out" 2>&1
  grep -q "device cpu (1 BLAS thread per rank), OpenBLAS [0-9.]*, [A-Za-z]* kernels" \
    "$WORK/fitted.out" && ! grep -q "Prescott kernels" "$WORK/fitted.out" ||
    fail "SSE kernels on a CPU with AVX2: $(head -1 "$WORK/fitted.out")"
fi
if [ "$cpus" -gt 1 ]; then
  grep -q "warning: 1 rank on this node may run on 1 of its $cpus CPUs.*--bind-to none" \
    "$WORK/bound.out" || fail "no idle-CPU warning: $(head -3 "$WORK/bound.out")"
fi
timeout $((120 * TIME_SCALE)) mpirun -q --bind-to none -np 1 "$DDP_TRAIN" "${tiny[@]}" > "$WORK/unbound.out" 2>&1
threads=$([ "$cpus" -gt 1 ] && echo "$cpus BLAS threads" || echo "1 BLAS thread")
grep -q "device cpu ($threads per rank)" "$WORK/unbound.out" ||
  fail "an unbound rank does not use the node's $cpus CPUs: $(head -3 "$WORK/unbound.out")"
! grep -q "stays* idle" "$WORK/unbound.out" || fail "idle-CPU warning without binding"
# A count in the environment wins over the share, as in PyTorch (torchrun
# sets OMP_NUM_THREADS=1); --threads wins over both.
OMP_NUM_THREADS=1 timeout $((120 * TIME_SCALE)) mpirun -q --bind-to none -np 1 "$DDP_TRAIN" "${tiny[@]}" > "$WORK/omp.out" 2>&1
grep -q "device cpu (1 BLAS thread per rank, from OMP_NUM_THREADS)" "$WORK/omp.out" ||
  fail "OMP_NUM_THREADS=1 not honoured: $(head -3 "$WORK/omp.out")"
OMP_NUM_THREADS=1 timeout $((120 * TIME_SCALE)) mpirun -q --bind-to none -np 1 "$DDP_TRAIN" "${tiny[@]}" --threads 2 \
  > "$WORK/omp.out" 2>&1
grep -q "device cpu (2 BLAS threads per rank, from --threads)" "$WORK/omp.out" ||
  fail "--threads does not win over OMP_NUM_THREADS: $(head -3 "$WORK/omp.out")"
echo "train smoke: ok"
