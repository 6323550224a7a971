#!/usr/bin/env bash
# ddp_bench on the GPU (cuBLAS, the Reducer on NCCL) against the same
# emulated model on the CPU. Without a CUDA device it checks the usage error
# instead and exits 77 (skipped).
. "$(dirname "$0")/lib.sh"
: "${DDP_BENCH:?set by meson}"
bench() { local np=$1; shift; timeout 300 mpirun -q -np "$np" "$DDP_BENCH" "$@"; }

# No device (or no CUDA in this build): one clear line, exit 2.
set +e
bench 1 --device cuda --profile mlp --steps 1 --warmup 0 --bucket-cap-mb 25 \
  > "$WORK/probe.out" 2> "$WORK/probe.err"
code=$?
set -e
skip_without_cuda "$code" "$WORK/probe.err"
[ "$code" = 0 ] || fail "--device cuda probe failed ($code): $(cat "$WORK/probe.err")"
grep -q "backend nccl, device cuda" "$WORK/probe.out" || fail "not on NCCL: $(head -1 "$WORK/probe.out")"

# Fixed caps and auto on the GPU: the run checks that replicas agree (exit 1
# otherwise). The emulated gradients are GEMMs of the same rank-seeded inputs
# on both devices, so the reduced gradients' norm must be the CPU's up to
# float32 rounding, whatever the cap: a bucket reduced before its GEMMs ran,
# or a GEMM laid out wrongly, would change it.
for profile in mlp resnet50; do
  bench 1 --device cuda --profile "$profile" --steps 3 --warmup 1 --bucket-cap-mb 1,25,inf,auto \
    --json "$WORK/gpu_$profile.json" > "$WORK/gpu_$profile.out" ||
    fail "ddp_bench --device cuda --profile $profile: $(cat "$WORK/gpu_$profile.out")"
  bench 1 --device cpu --profile "$profile" --steps 1 --warmup 0 --bucket-cap-mb 25 \
    --json "$WORK/cpu_$profile.json" > /dev/null
  cat "$WORK/gpu_$profile.out"
done
python3 - "$WORK" <<'PY' || fail "GPU ddp_bench differs from the CPU's"
import json, sys
work = sys.argv[1]
for profile in ["mlp", "resnet50"]:
    gpu = json.load(open(f"{work}/gpu_{profile}.json"))
    cpu = json.load(open(f"{work}/cpu_{profile}.json"))
    assert (gpu["backend"], gpu["device"]) == ("nccl", "cuda"), gpu
    reference = cpu["results"][0]["gradient_norm"]
    assert reference > 0, cpu
    for r in gpu["results"]:
        error = abs(r["gradient_norm"] - reference) / reference
        print(f"{profile} cap {r['cap']}: step {r['step_ms']:.3f} ms, exposed "
              f"{100 * r['exposed_fraction']:.1f}%, norm off the CPU's by {error:.1e}")
        assert r["wrong"] == 0 and r["step_ms"] > 0 and r["comm_ms"] >= 0, r
        assert error < 1e-4, (profile, r, reference)
    auto = next(r for r in gpu["results"] if r["cap"] == "auto")
    assert auto["chosen"] in ("1", "5", "25", "100", "single"), auto
PY
echo "gpu_ddp_bench: ok"
