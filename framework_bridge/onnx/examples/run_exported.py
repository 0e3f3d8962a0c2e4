#!/usr/bin/env python3
"""A PyTorch model exported to ONNX, run through the HAL exactly as onnxruntime would run it.

Exports a small GPT-style decoder (token embedding, causal self-attention, GELU MLP, LayerNorm; the
sequence length dynamic) with torch.onnx.export, then runs the same file with hal.onnx.InferenceSession
(the device and plugins are the hal.toml's: --config or $HAL_CONFIG) and with onnxruntime, at three
sequence lengths. Prints the partition, the compile counts and timings, and exits non-zero when any
output disagrees with onnxruntime.

    PYTHONPATH=<build>/python python run_exported.py [--config hal.toml] [--opset 13|newest]
"""
import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import onnxruntime
import torch
from torch import nn

import hal.onnx


class Block(nn.Module):
    def __init__(self, d, heads, max_len):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att.masked_fill(~self.mask[:s, :s], float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, max_len=128):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.Sequential(*[Block(d, heads, max_len) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.head(self.blocks(self.embed(ids) + self.pos(pos)))


def export(path, opset):
    torch.manual_seed(0)
    model = Decoder().eval()
    ids = torch.randint(0, 256, (2, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if opset == "newest":
            seq = torch.export.Dim("seq", min=2, max=128)
            torch.onnx.export(model, (ids,), path, input_names=["ids"], output_names=["logits"], dynamo=True,
                              dynamic_shapes={"ids": {1: seq}}, verbose=False)
        else:
            torch.onnx.export(model, (ids,), path, input_names=["ids"], output_names=["logits"], dynamo=False,
                              opset_version=int(opset), dynamic_axes={"ids": {0: "batch", 1: "seq"}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.environ.get("HAL_CONFIG"), help="hal.toml (default: $HAL_CONFIG)")
    ap.add_argument("--opset", default="newest", help="13..17 (TorchScript exporter) or newest (dynamo exporter)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "decoder.onnx")
        t0 = time.perf_counter()
        export(path, args.opset)
        print(f"exported {path} (opset {args.opset}) in {time.perf_counter() - t0:.1f} s")
        opts = hal.onnx.SessionOptions()
        if args.config:
            opts.hal_config = args.config
        t0 = time.perf_counter()
        sess = hal.onnx.InferenceSession(path, opts)
        print(f"hal.onnx session: load + pipeline + compile {1e3 * (time.perf_counter() - t0):.1f} ms")
        print("inputs:", [(i.name, i.shape, i.type) for i in sess.get_inputs()])
        print(sess.explain())
        ref = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        before = hal.onnx.compile_counters()
        worst = 0.0
        def timed(run, feeds):
            t0 = time.perf_counter()
            out = run(None, feeds)
            return out, 1e3 * (time.perf_counter() - t0)

        for seq in (5, 16, 37):
            ids = np.random.default_rng(seq).integers(0, 256, size=(2, seq), dtype=np.int64)
            # The first run at a new length plans (and on hal compiles) for it: shown apart from
            # the warmed time, the median of 5 runs each.
            [got], hal_first = timed(sess.run, {"ids": ids})
            [want], ort_first = timed(ref.run, {"ids": ids})
            hal_ms = float(np.median([timed(sess.run, {"ids": ids})[1] for _ in range(5)]))
            ort_ms = float(np.median([timed(ref.run, {"ids": ids})[1] for _ in range(5)]))
            err = float(np.max(np.abs(got - want)))
            worst = max(worst, err)
            print(f"seq {seq:3d}: logits {got.shape}, max |hal - onnxruntime| = {err:.2e}; "
                  f"warmed (median of 5): hal {hal_ms:.2f} ms, onnxruntime {ort_ms:.2f} ms; "
                  f"first run at this length: hal {hal_first:.2f} ms, onnxruntime {ort_first:.2f} ms")
        after = hal.onnx.compile_counters()
        print("compile counters over the 3 lengths:", {k: after[k] - before.get(k, 0) for k in after})
        if not worst <= 1e-4:
            print(f"FAILED: hal.onnx disagrees with onnxruntime by {worst:.2e}")
            return 1
    print("hal.onnx agrees with onnxruntime at every length")
    return 0


if __name__ == "__main__":
    sys.exit(main())
