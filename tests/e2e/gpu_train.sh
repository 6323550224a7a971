#!/usr/bin/env bash
# ddp_train on the GPU against the CPU reference. Without a CUDA device it
# checks the usage error instead and exits 77 (skipped). After the probe,
# each feature is a section of its own (lib.sh): a GPU is lent for minutes,
# so one run reports every section that fails, not only the first.
. "$(dirname "$0")/lib.sh"
need_fmnist
# Each run takes seconds (a CPU epoch on four threads the longest); a hang
# must not cost a lent GPU's minutes eight sections over.
RUN_TIMEOUT=60

# No device (or no CUDA in this build): one clear line, exit 2, no MPI noise.
set +e
run 1 --device cuda --dataset synthetic --max-steps 1 > "$WORK/probe.out" 2> "$WORK/probe.err"
code=$?
set -e
skip_without_cuda "$code" "$WORK/probe.err"
[ "$code" = 0 ] || fail "--device cuda probe failed ($code): $(cat "$WORK/probe.err")"
grep -q "backend nccl, device cuda" "$WORK/probe.out" || fail "not on NCCL/CUDA: $(head -3 "$WORK/probe.out")"
grep -q "local rank 0, GPU 0 " "$WORK/probe.out" || fail "no per-rank GPU line: $(head -3 "$WORK/probe.out")"

# One epoch of Fashion-MNIST: the GPU reaches the CPU's accuracy (same seed,
# same batches; the arithmetic differs only in rounding), and so do the
# evaluations within it (--eval-every). --metrics-every 67 (14 lines cover
# the 938 steps) reads the loss at steps that --log-every's reads (every 50)
# miss: the lines average to the epoch's train_loss, as on the CPU.
# --save-best writes device weights mid-run: evaluated again, the file gives
# the lowest of the five evaluations' test losses.
one_epoch() {
  epoch=(--epochs 1 --hidden 1024,1024 --batch-size 64 --seed 42 --eval-every 200 --metrics-every 67)
  run 1 "${epoch[@]}" --device cuda --metrics "$WORK/gpu.jsonl" \
    --save-model "$WORK/epoch.safetensors" --save-best "$WORK/best.safetensors" > "$WORK/gpu.log"
  run 1 "${epoch[@]}" --device cpu --threads 4 --metrics "$WORK/cpu.jsonl" > "$WORK/cpu.log"
  # --evaluate of the GPU's weights, on the GPU and on the CPU: the epoch's
  # own figure on the GPU, the same within rounding on the CPU.
  run 1 --evaluate --init-from "$WORK/epoch.safetensors" --device cuda \
    --metrics "$WORK/gpu_eval.jsonl" > /dev/null
  run 1 --evaluate --init-from "$WORK/epoch.safetensors" --device cpu --threads 4 \
    --metrics "$WORK/cpu_eval.jsonl" > /dev/null
  run 1 --evaluate --init-from "$WORK/best.safetensors" --device cuda \
    --metrics "$WORK/best_eval.jsonl" > /dev/null
  python3 - "$WORK/gpu.jsonl" "$WORK/cpu.jsonl" "$WORK/gpu_eval.jsonl" "$WORK/cpu_eval.jsonl" \
    "$WORK/best_eval.jsonl" <<'PY' ||
import json, sys
lines = [[json.loads(l) for l in open(p)] for p in sys.argv[1:5]]
# A training run's last line is its end (Note [The run's last --metrics
# line]); its last epoch line comes before it.
assert all(ls[-1]["ended_by"] == "epochs" and ls[-1]["last_step"] == 938 for ls in lines[:2]), lines
gpu, cpu = ([m for m in ls if "train_loss" in m][-1] for ls in lines[:2])
gpu_eval, cpu_eval = (ls[-1] for ls in lines[2:])
gpu_steps, cpu_steps = ([m for m in ls if "test_accuracy" in m and "global_step" in m] for ls in lines[:2])
gpu_curve, cpu_curve = ([m for m in ls if "loss" in m] for ls in lines[:2])
for curve, end in ((gpu_curve, gpu), (cpu_curve, cpu)):
    assert [m["global_step"] for m in curve] == list(range(67, 939, 67)), curve
    mean = sum(m["loss"] for m in curve) / len(curve)
    assert abs(mean - end["train_loss"]) <= 1e-9 * end["train_loss"], (mean, end["train_loss"])
for g, c in zip(gpu_curve, cpu_curve):
    assert abs(g["loss"] - c["loss"]) <= 0.05 * c["loss"], (g, c)
print(f"1 epoch: GPU {gpu['test_accuracy']:.4f}, CPU {cpu['test_accuracy']:.4f}; "
      f"--evaluate: GPU {gpu_eval['test_accuracy']:.4f}, CPU {cpu_eval['test_accuracy']:.4f}; "
      f"--eval-every 200: GPU {[m['test_accuracy'] for m in gpu_steps]}, "
      f"CPU {[m['test_accuracy'] for m in cpu_steps]}")
assert [m["global_step"] for m in gpu_steps] == [200, 400, 600, 800], gpu_steps
# Early in the epoch rounding moves the accuracy by a few points (the CPU
# standing in for the GPU, its default BLAS threads against --threads 4:
# 0.776 and 0.744 at step 200).
for g, c in zip(gpu_steps, cpu_steps, strict=True):
    assert g["global_step"] == c["global_step"] and abs(g["test_accuracy"] - c["test_accuracy"]) < 0.05, (g, c)
assert gpu["test_accuracy"] > 0.80, gpu
assert abs(gpu["test_accuracy"] - cpu["test_accuracy"]) < 0.01, (gpu, cpu)
assert gpu["steps"] == cpu["steps"]
assert gpu_eval["test_samples"] == gpu["test_samples"], (gpu_eval, gpu)
assert abs(gpu_eval["test_accuracy"] - gpu["test_accuracy"]) < 1e-9, (gpu_eval, gpu)
assert abs(cpu_eval["test_accuracy"] - gpu["test_accuracy"]) <= 0.002, (cpu_eval, gpu)
best = json.loads(open(sys.argv[5]).read().splitlines()[-1])["test_loss"]
lowest = min(m["test_loss"] for m in gpu_steps + [gpu])
assert abs(best - lowest) <= 1e-6 * lowest, (best, lowest)
print(f"--save-best: test_loss {best:.6f}, the lowest of {[m['test_loss'] for m in gpu_steps + [gpu]]}")
PY
    fail "GPU accuracy differs from CPU, or --evaluate from the epoch's"
}
section "one epoch: GPU accuracy as the CPU's, --evaluate" one_epoch

# 30 steps: NCCL on the GPU gives the parameters MPI gives on the CPU.
model=(--hidden 256,128 --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --seed 3)
short=("${model[@]}" --max-steps 30)
against_cpu() {
  run 1 "${short[@]}" --device cuda --save-model "$WORK/gpu.safetensors" > /dev/null
  run 1 "${short[@]}" --device cpu --threads 1 --save-model "$WORK/cpu.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/cpu.safetensors" "$WORK/gpu.safetensors" --rtol 1e-3 ||
    fail "GPU parameters differ from CPU"
  # The GPU run is deterministic, and gradient accumulation matches a big batch.
  run 1 "${short[@]}" --device cuda --save-model "$WORK/gpu2.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu.safetensors" "$WORK/gpu2.safetensors" --exact ||
    fail "two GPU runs differ"
  run 1 "${short[@]}" --device cuda --batch-size 32 --grad-accum 2 \
    --save-model "$WORK/accum.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu.safetensors" "$WORK/accum.safetensors" --rtol 1e-4 ||
    fail "gradient accumulation on the GPU differs from one big batch"
  # --grad-compression bf16 on the GPU (kernels round and widen on the
  # compute stream, NCCL reduces bfloat16): it changes the weights, stays
  # within 1% of float32, and in a world of one rounds as the CPU does.
  run 1 "${short[@]}" --device cuda --grad-compression bf16 \
    --save-model "$WORK/gpu_bf16.safetensors" > "$WORK/gpu_bf16.log"
  grep -q "sent as bfloat16" "$WORK/gpu_bf16.log" || fail "bf16 not in the GPU run's summary"
  if cmp -s "$WORK/gpu.safetensors" "$WORK/gpu_bf16.safetensors"; then fail "bf16 changed nothing on the GPU"; fi
  "$COMPARE_WEIGHTS" "$WORK/gpu.safetensors" "$WORK/gpu_bf16.safetensors" --rtol 1e-2 ||
    fail "bf16 on the GPU drifted from float32"
  run 1 "${short[@]}" --device cpu --threads 1 --grad-compression bf16 \
    --save-model "$WORK/cpu_bf16.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/cpu_bf16.safetensors" "$WORK/gpu_bf16.safetensors" --rtol 1e-3 ||
    fail "bf16 on the GPU differs from bf16 on the CPU"
}
section "30 steps: NCCL as MPI, deterministic, accumulation, bf16" against_cpu

# --skip-nonfinite on the GPU (Note [Skipping a step on the device]): step
# 4's gradients are poisoned; the update is cancelled on the device, reported
# and counted when the loss is read, and the run ends where the CPU run that
# skips the same step ends.
poison=(--inject-fault nonfinite:0:4 --skip-nonfinite)
skip_nonfinite() {
  run 1 "${short[@]}" "${poison[@]}" --device cuda --metrics "$WORK/gpu_skip.jsonl" \
    --save-model "$WORK/gpu_skip.safetensors" > "$WORK/gpu_skip.log" 2>&1
  grep -q "step 4: the gradient of .* holds a NaN or infinity" "$WORK/gpu_skip.log" ||
    fail "GPU skip not reported: $(cat "$WORK/gpu_skip.log")"
  grep -q '"skipped_steps":1' "$WORK/gpu_skip.jsonl" || fail "GPU skip not counted in --metrics"
  run 1 "${short[@]}" "${poison[@]}" --device cpu --threads 1 \
    --save-model "$WORK/cpu_skip.safetensors" > /dev/null 2>&1
  "$COMPARE_WEIGHTS" "$WORK/cpu_skip.safetensors" "$WORK/gpu_skip.safetensors" --rtol 1e-3 ||
    fail "a GPU run skipping step 4 differs from the CPU run skipping it"
}
section "--skip-nonfinite" skip_nonfinite

# --clip-grad-norm on the GPU (Note [Clipping the averaged gradient]): norm
# and scale stay on the device, the norms reach the progress line and
# --metrics when the loss is read, and the run ends where the CPU's does.
clip=(--clip-grad-norm 0.5 --log-every 10)
clip_norm() {
  run 1 "${short[@]}" "${clip[@]}" --device cuda --metrics "$WORK/gpu_clip.jsonl" \
    --save-model "$WORK/gpu_clip.safetensors" > "$WORK/gpu_clip.log"
  run 1 "${short[@]}" "${clip[@]}" --device cpu --threads 1 --metrics "$WORK/cpu_clip.jsonl" \
    --save-model "$WORK/cpu_clip.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/cpu_clip.safetensors" "$WORK/gpu_clip.safetensors" --rtol 1e-3 ||
    fail "a clipped GPU run differs from the clipped CPU run"
  grep -q "step 10/938 .* grad-norm [0-9.]* ([0-9]* clipped)" "$WORK/gpu_clip.log" ||
    fail "no gradient norm in the GPU's progress line: $(grep "step 10/" "$WORK/gpu_clip.log")"
  python3 - "$WORK/gpu_clip.jsonl" "$WORK/cpu_clip.jsonl" <<'PY' || fail "GPU gradient norms differ from the CPU's"
import json, sys
gpu, cpu = (json.loads(open(p).readline()) for p in sys.argv[1:3])
print(f"clipped steps: GPU {gpu['clipped_steps']}, CPU {cpu['clipped_steps']}; "
      f"max norm GPU {gpu['grad_norm_max']:.5f}, CPU {cpu['grad_norm_max']:.5f}")
assert gpu["clipped_steps"] == cpu["clipped_steps"] > 0, (gpu, cpu)
assert abs(gpu["grad_norm_max"] - cpu["grad_norm_max"]) <= 1e-3 * cpu["grad_norm_max"], (gpu, cpu)
PY
  run 1 "${short[@]}" "${clip[@]}" --device cuda --save-model "$WORK/gpu_clip2.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu_clip.safetensors" "$WORK/gpu_clip2.safetensors" --exact ||
    fail "two clipped GPU runs differ (the norm is not deterministic)"
}
section "--clip-grad-norm" clip_norm

# A checkpoint written from the GPU resumes exactly (constant rate: the
# interrupted run's plan is shorter).
checkpoints() {
  constant=("${model[@]}" --lr-schedule constant --device cuda)
  run 1 "${constant[@]}" --max-steps 30 --save-model "$WORK/straight.safetensors" > /dev/null
  run 1 "${constant[@]}" --max-steps 15 --checkpoint-dir "$WORK/ck" > /dev/null
  run 1 "${constant[@]}" --max-steps 30 --checkpoint-dir "$WORK/ck" --resume --save-model "$WORK/resumed.safetensors" \
    > "$WORK/resumed.log"
  grep -q "resume: from" "$WORK/resumed.log" || fail "did not resume on the GPU"
  "$COMPARE_WEIGHTS" "$WORK/straight.safetensors" "$WORK/resumed.safetensors" --exact ||
    fail "a GPU run resumed from its checkpoint differs from the uninterrupted one"
  # Written directly (--checkpoint-staging direct), each device tensor goes
  # to the file through one 4 MiB host piece (the 2048 x 2048 weights: four),
  # and the file is the copy's, byte for byte.
  wide=(--hidden 2048,2048 --lr-schedule constant --device cuda --max-steps 2 --checkpoint-every 2)
  for staging in copy direct; do
    run 1 "${wide[@]}" --checkpoint-dir "$WORK/ck_$staging" --checkpoint-staging "$staging" > /dev/null
  done
  cmp -s "$WORK/ck_copy/checkpoint-000000002.safetensors" "$WORK/ck_direct/checkpoint-000000002.safetensors" ||
    fail "a GPU checkpoint written directly differs from the copy's"
}
section "checkpoints: resume, direct staging" checkpoints

# AdamW on the GPU (its step count lives on the device): with a skipped
# step and clipping it ends where the CPU run does, and a checkpoint of its
# moments and count resumes exactly.
adamw=(--hidden 256,128 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --no-bias-decay --seed 3
  --lr-schedule constant)
adamw_runs() {
  run 1 "${adamw[@]}" --max-steps 30 "${poison[@]}" "${clip[@]}" --device cuda \
    --save-model "$WORK/gpu_adamw.safetensors" > /dev/null 2>&1
  run 1 "${adamw[@]}" --max-steps 30 "${poison[@]}" "${clip[@]}" --device cpu --threads 1 \
    --save-model "$WORK/cpu_adamw.safetensors" > /dev/null 2>&1
  "$COMPARE_WEIGHTS" "$WORK/cpu_adamw.safetensors" "$WORK/gpu_adamw.safetensors" --rtol 1e-3 ||
    fail "an AdamW GPU run differs from the CPU run"
  run 1 "${adamw[@]}" --max-steps 15 --device cuda --checkpoint-dir "$WORK/ck_adamw" > /dev/null
  run 1 "${adamw[@]}" --max-steps 30 --device cuda --checkpoint-dir "$WORK/ck_adamw" --resume \
    --save-model "$WORK/gpu_adamw_resumed.safetensors" > /dev/null
  run 1 "${adamw[@]}" --max-steps 30 --device cuda --save-model "$WORK/gpu_adamw_straight.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu_adamw_straight.safetensors" "$WORK/gpu_adamw_resumed.safetensors" --exact ||
    fail "a GPU AdamW run resumed from its checkpoint differs from the uninterrupted one"
}
# Sharded runs compare with these runs' files.
section "AdamW" adamw_runs
sharded() {
  # Sharded state (a world of one: the in-place ncclAllGather, the device
  # slices, the gather of the moments to the host for checkpoints) changes
  # nothing: the same weights, and the same checkpoint resumes exactly.
  run 1 "${adamw[@]}" --max-steps 30 --device cuda --shard-optimizer \
    --save-model "$WORK/gpu_adamw_sharded.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu_adamw_straight.safetensors" "$WORK/gpu_adamw_sharded.safetensors" --exact ||
    fail "a sharded GPU AdamW run differs from the unsharded one"
  # Its gradients are reduce-scattered (ncclReduce per part), and the skip
  # flag and the norm are combined from the ranks' parts on the device (Note
  # [Reduce-scatter for a sharded optimizer]): in a world of one, the bits of
  # the unsharded run that skips step 4 and clips.
  run 1 "${adamw[@]}" --max-steps 30 "${poison[@]}" "${clip[@]}" --device cuda --shard-optimizer \
    --metrics "$WORK/gpu_adamw_sharded_clip.jsonl" \
    --save-model "$WORK/gpu_adamw_sharded_clip.safetensors" > "$WORK/gpu_adamw_sharded_clip.log" 2>&1
  grep -q "reduce-scattered" "$WORK/gpu_adamw_sharded_clip.log" ||
    fail "a sharded GPU run does not reduce-scatter: $(grep reducer "$WORK/gpu_adamw_sharded_clip.log")"
  grep -q "step 4: the gradient of .* holds a NaN or infinity" \
    "$WORK/gpu_adamw_sharded_clip.log" || fail "a sharded GPU run did not skip step 4"
  grep -q '"skipped_steps":1' "$WORK/gpu_adamw_sharded_clip.jsonl" ||
    fail "a sharded GPU run's skip not counted in --metrics"
  "$COMPARE_WEIGHTS" "$WORK/gpu_adamw.safetensors" "$WORK/gpu_adamw_sharded_clip.safetensors" --exact ||
    fail "a sharded GPU AdamW run that skips and clips differs from the unsharded one"
  # Its checkpoint, the moments streamed from device memory into the file
  # (Note [Streaming a sharded optimizer's state]), holds the unsharded one's
  # tensors, bit for bit.
  run 1 "${adamw[@]}" --max-steps 15 --device cuda --shard-optimizer \
    --checkpoint-dir "$WORK/ck_adamw_sharded" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/ck_adamw/checkpoint-000000015.safetensors" \
    "$WORK/ck_adamw_sharded/checkpoint-000000015.safetensors" --exact > /dev/null ||
    fail "a sharded GPU AdamW checkpoint differs from the unsharded one"
  run 1 "${adamw[@]}" --max-steps 30 --device cuda --shard-optimizer \
    --resume "$WORK/ck_adamw/checkpoint-000000015.safetensors" \
    --save-model "$WORK/gpu_adamw_sharded_resumed.safetensors" > /dev/null
  "$COMPARE_WEIGHTS" "$WORK/gpu_adamw_straight.safetensors" "$WORK/gpu_adamw_sharded_resumed.safetensors" --exact ||
    fail "a sharded GPU AdamW run resumed from a checkpoint differs from the uninterrupted one"
}
section "--shard-optimizer" sharded

# Every process of the job stopped for 8 s (SIGSTOP, as Slurm's scontrol
# suspend does), twice --timeout, a collective in flight: the run goes on,
# with no timeout and no report, and --time-limit 6s ends it after 6 s of
# running time (Note [Time the process was stopped]): the NCCL waits and
# the NCCL watch count only the time the process ran. The end line says how
# long it was suspended.
suspended() {
  # The limit stretches with a sanitizer's slowness (a ThreadSanitizer
  # start-up alone took more than 6 s): the stop must come before it.
  local limit=$((6 * TIME_SCALE))
  timeout $((120 * TIME_SCALE)) mpirun -q -np 1 "$DDP_TRAIN" --device cuda --dataset synthetic \
    --synthetic-samples 40000 --hidden 256 --epochs 100000 --time-limit "${limit}s" --timeout 4 \
    --stall-warning 1 --metrics "$WORK/suspended.jsonl" > "$WORK/suspended.out" 2>&1 &
  local job=$! code processes
  for _ in $(seq 400); do
    grep -q "reducer:" "$WORK/suspended.out" 2> /dev/null && break
    sleep 0.05
  done
  sleep 1
  processes=$(descendants "$job")
  kill -STOP $processes
  sleep 8
  kill -CONT $processes
  set +e
  wait "$job"
  code=$?
  set -e
  [ "$code" = 3 ] || fail "exit $code after the stop: $(grep -v ' step ' "$WORK/suspended.out" | tail -8)"
  ends_with "$WORK/suspended.jsonl" ended_by=time_limit
  ! grep -qE "error|stall|watchdog: rank|timed out|did not complete" "$WORK/suspended.out" ||
    fail "reported after the stop: $(grep -E "error|stall|watchdog" "$WORK/suspended.out" | head -5)"
  grep -q "watchdog: this process was not run for" "$WORK/suspended.out" ||
    fail "rank 0 did not say it was stopped: $(grep -v ' step ' "$WORK/suspended.out" | tail -5)"
  python3 -c "import json, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ran = end['run_time_s'] - end.get('suspended_s', 0)
assert 7 <= end.get('suspended_s', 0) <= 9 and ran <= int(sys.argv[2]), end" "$WORK/suspended.jsonl" "$limit" ||
    fail "the end line: $(tail -1 "$WORK/suspended.jsonl")"
}
section "suspended 8 s with --timeout 4" suspended

# A collective stuck where the library runs it (--inject-fault hang: held
# behind a host function on NCCL's stream): the NCCL watchdog aborts the
# communicator at --timeout and its handler ends the job, while the
# training thread may meet the same failure; one report (Note [One thread
# ends the job] in launcher/job_ending.h), which blames no peer.
held_collective() {
  set +e
  timeout $((60 * TIME_SCALE)) mpirun -q -np 1 "$DDP_TRAIN" --device cuda --dataset synthetic \
    --synthetic-samples 4000 --hidden 64 --epochs 20 --timeout 3 --stall-warning 1 \
    --inject-fault hang:0:5:20 > "$WORK/held.out" 2>&1
  local code=$?
  set -e
  [ "$code" = 1 ] || fail "exit $code: $(grep -v ' step ' "$WORK/held.out" | tail -8)"
  [ "$(grep -c "error: watchdog: rank 0 .*: it has no peers, so the collective itself is stuck" \
    "$WORK/held.out")" = 1 ] && [ "$(grep -c "error: .*did not complete within 3 s" "$WORK/held.out")" = 1 ] ||
    fail "not one report of the held collective: $(grep -E "error|watchdog" "$WORK/held.out" | head -8)"
}
section "a collective held past --timeout" held_collective

# More ranks on the node than GPUs: a usage error naming both counts.
too_many_ranks() {
    gpus=$(nvidia-smi -L | grep -c '^GPU')
    set +e
    run $((gpus + 1)) --device cuda --dataset synthetic --max-steps 1 > /dev/null 2> "$WORK/many.err"
    code=$?
    set -e
    [ "$code" = 2 ] || fail "too many ranks per GPU exited $code"
    grep -q "$((gpus + 1)) ranks run on this node but only $gpus GPU" "$WORK/many.err" ||
      fail "unclear message: $(cat "$WORK/many.err")"
}
# (Not when the CPU stands in for the GPU: gpu_train_rehearsal.sh.)
if command -v nvidia-smi > /dev/null && [ -z "${GPU_STAND_IN:-}" ]; then
  section "more ranks than GPUs" too_many_ranks
fi

sections_done
echo "gpu_train: ok"
