#!/usr/bin/env bash
# Note [Subnormal floats]: ddp_train flushes subnormal floats to zero, and
# --keep-subnormals computes with them. A first layer of subnormal weights
# whose ReLUs are all dead (bias -1) gets no gradient; weight decay's share
# (0.01 x 1e-40) is subnormal too. Flushed, the weights are read as 0 and
# written back as 0; kept, they shrink by a thousandth a step and stay.
. "$(dirname "$0")/lib.sh"
base=(--dataset synthetic --synthetic-samples 256 --hidden 32 --batch-size 16 --threads 1
  --weight-decay 0.01 --lr-schedule constant)
run 1 "${base[@]}" --max-steps 1 --save-model "$WORK/start.safetensors" > /dev/null

# One reader of safetensors files for both uses below (no numpy here):
#   dead IN OUT: OUT is IN with layers.0's weights 1e-40 (subnormal) and
#     biases -1, the rest as trained, without ddp's metadata (its
#     checksums), as PyTorch writes a file;
#   census FILE: "zero Z subnormal S other O" over layers.0.weight.
cat > "$WORK/tensors.py" <<'PY'
import json, struct, sys

def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), bytearray(data[8 + n:])

header, body = read(sys.argv[2])
if sys.argv[1] == "dead":
    header.pop("__metadata__", None)
    for name, fill in (("layers.0.weight", 1e-40), ("layers.0.bias", -1.0)):
        begin, end = header[name]["data_offsets"]
        body[begin:end] = struct.pack("<f", fill) * ((end - begin) // 4)
    text = json.dumps(header).encode()
    open(sys.argv[3], "wb").write(struct.pack("<Q", len(text)) + text + bytes(body))
else:
    begin, end = header["layers.0.weight"]["data_offsets"]
    values = struct.unpack("<%df" % ((end - begin) // 4), body[begin:end])
    zero = sum(1 for v in values if v == 0)
    subnormal = sum(1 for v in values if v != 0 and abs(v) < 2.0 ** -126)
    print("zero %d subnormal %d other %d" % (zero, subnormal, len(values) - zero - subnormal))
PY
python3 "$WORK/tensors.py" dead "$WORK/start.safetensors" "$WORK/dead.safetensors"
census() { python3 "$WORK/tensors.py" census "$1"; }
[ "$(census "$WORK/dead.safetensors")" = "zero 0 subnormal 25088 other 0" ] ||
  fail "the starting weights are not all subnormal: $(census "$WORK/dead.safetensors")"

for np in 1 2; do
  run $np "${base[@]}" --init-from "$WORK/dead.safetensors" --max-steps 3 \
    --save-model "$WORK/flushed$np.safetensors" > /dev/null
  run $np "${base[@]}" --init-from "$WORK/dead.safetensors" --max-steps 3 --keep-subnormals \
    --save-model "$WORK/kept$np.safetensors" > /dev/null
  flushed=$(census "$WORK/flushed$np.safetensors") kept=$(census "$WORK/kept$np.safetensors")
  [ "$flushed" = "zero 25088 subnormal 0 other 0" ] || fail "np=$np flushed: $flushed"
  [ "$kept" = "zero 0 subnormal 25088 other 0" ] || fail "np=$np --keep-subnormals: $kept"
  # Everything else trained alike: the last layer sees the same (dead) input.
  "$COMPARE_WEIGHTS" "$WORK/flushed$np.safetensors" "$WORK/kept$np.safetensors" --only layers.2 \
    --exact > /dev/null || fail "np=$np: layers.2 differs between the two modes"
  echo "np=$np: flushed layers.0.weight $flushed; kept $kept"
done
