"""PyTorch side of tests/e2e/pytorch_interop.sh.

  check  WEIGHTS DATA_DIR ACCURACY   load ddp_train's weights into an nn.Module whose
                                     nn.Sequential sits in `layers`, with strict names and
                                     shapes; its test accuracy must equal ddp_train's, and
                                     the file's checksums must be what Python's zlib.crc32
                                     computes
  write  WEIGHTS HIDDEN SEED [DTYPE] write a freshly initialised PyTorch MLP as safetensors,
                                     in float32 or DTYPE (F16, BF16, F64)
  step   WEIGHTS DATA_DIR BATCH LR MAX_NORM OUT
                                     one SGD step (no momentum) from WEIGHTS on the first
                                     BATCH training samples, the gradient clipped with
                                     clip_grad_norm_(MAX_NORM); writes OUT and prints the norm
  adamw  WEIGHTS DATA_DIR BATCH STEPS LR WEIGHT_DECAY OUT [no-bias-decay]
                                     STEPS torch.optim.AdamW steps from WEIGHTS, each on the
                                     next BATCH training samples in file order (the biases in
                                     a group without weight decay if asked); writes OUT

Reads and writes safetensors with a few lines of its own (Debian has no safetensors
package): 8-byte little-endian header length, JSON header, raw data.
"""
import gzip
import json
import struct
import sys
import zlib

import torch
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        widths = [784] + hidden + [10]
        layers = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1]))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


def check_checksums(path):
    """Note [Checksums in safetensors files], from Python's side."""
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    meta = header["__metadata__"]
    for name, entry in header.items():
        if name != "__metadata__":
            begin, end = entry["data_offsets"]
            crc = zlib.crc32(data[8 + length + begin : 8 + length + end])
            assert meta[f"ddp.crc32.{name}"] == f"{crc:08x}", name
    canonical = b"".join(
        k.encode() + b"\0" + v.encode() + b"\0" for k, v in sorted(meta.items()) if k != "ddp.metadata_crc32"
    )
    assert meta["ddp.metadata_crc32"] == f"{zlib.crc32(canonical):08x}"


def read_safetensors(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + length + begin : 8 + length + end])
        tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(entry["shape"]).clone()
    return tensors


TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().to(TORCH_DTYPES[dtype])
        raw = (t.view(torch.int16) if dtype == "BF16" else t).numpy().tobytes()  # numpy has no bfloat16
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_idx(path):
    data = gzip.open(path).read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims :]), dtype=torch.uint8).reshape(shape)


def load_model(weights):
    tensors = read_safetensors(weights)
    hidden = [tensors[f"layers.{2 * i}.weight"].shape[0] for i in range(len(tensors) // 2 - 1)]
    model = Mlp(hidden)
    model.load_state_dict(tensors, strict=True)
    return model


def train_batches(data_dir, batch, steps):
    count = batch * steps
    images = load_idx(f"{data_dir}/train-images-idx3-ubyte.gz")[:count].reshape(-1, 784).float() / 255
    labels = load_idx(f"{data_dir}/train-labels-idx1-ubyte.gz")[:count].long()
    return [(images[i : i + batch], labels[i : i + batch]) for i in range(0, count, batch)]


def main():
    if sys.argv[1] == "check":
        weights, data_dir, expected = sys.argv[2], sys.argv[3], float(sys.argv[4])
        check_checksums(weights)
        tensors = read_safetensors(weights)
        hidden = [tensors[f"layers.{2 * i}.weight"].shape[0] for i in range(len(tensors) // 2 - 1)]
        model = Mlp(hidden)
        model.load_state_dict(tensors, strict=True)
        images = load_idx(f"{data_dir}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).float() / 255
        labels = load_idx(f"{data_dir}/t10k-labels-idx1-ubyte.gz").long()
        with torch.no_grad():
            accuracy = (model(images).argmax(1) == labels).float().mean().item()
        print(f"PyTorch accuracy with ddp_train's weights: {accuracy:.4f} (ddp_train: {expected:.4f})")
        assert abs(accuracy - expected) < 1e-3, (accuracy, expected)
    elif sys.argv[1] == "step":
        weights, data_dir, batch, lr, max_norm, out = sys.argv[2:8]
        model = load_model(weights)
        [(images, labels)] = train_batches(data_dir, int(batch), 1)
        nn.functional.cross_entropy(model(images), labels).backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), float(max_norm))
        torch.optim.SGD(model.parameters(), lr=float(lr)).step()
        write_safetensors(out, model.state_dict())
        print(f"{norm.item():.6g}")
    elif sys.argv[1] == "adamw":
        weights, data_dir, batch, steps, lr, weight_decay, out = sys.argv[2:9]
        model = load_model(weights)
        groups = [{"params": [p for p in model.parameters() if p.dim() > 1]},
                  {"params": [p for p in model.parameters() if p.dim() == 1]}]
        if sys.argv[9:] == ["no-bias-decay"]:
            groups[1]["weight_decay"] = 0.0
        optimizer = torch.optim.AdamW(groups, lr=float(lr), weight_decay=float(weight_decay))
        for images, labels in train_batches(data_dir, int(batch), int(steps)):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
        write_safetensors(out, model.state_dict())
    else:
        weights, hidden, seed = sys.argv[2], [int(w) for w in sys.argv[3].split(",")], int(sys.argv[4])
        torch.manual_seed(seed)
        write_safetensors(weights, Mlp(hidden).state_dict(), sys.argv[5] if len(sys.argv) > 5 else "F32")


if __name__ == "__main__":
    main()
