#!/usr/bin/env python3
"""Trains small models with plain PyTorch code on device="hal" and, from the same initial weights
and batches, on PyTorch CPU; prints the device, its plugin, the CPU-fallback counts and both loss
curves, and exits non-zero when they disagree (any step's loss, or any final parameter or buffer).

    PYTHONPATH=<build>/python HAL_CONFIG=hal/config/hal.toml \\
        python framework_bridge/pytorch/examples/train_compare.py [--models mlp,decoder] [--optims sgd]

Which plugin runs "hal" is hal.toml's business ($HAL_CONFIG): the same command trains on the CPU
plugin or on the OpenCL plugin. The models (MLP and CNN on scikit-learn's 8x8 digits, a Llama-style
decoder block on a learnable token sequence) are imported by tests/test_training.py and
bench/torch_hal_bench.py.

Dropout draws its masks from the device's generator, which is not the CPU's: the hal run records
every nn.Dropout's mask and the CPU run replays it (DropoutMasks), so the comparison stays exact
while dropout really runs on "hal".
"""
import argparse
import copy
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

STEPS = 20
# Per-step losses and final parameters, hal vs CPU (float32; kernels sum in different orders).
LOSS_TOL = dict(rtol=1e-4, atol=1e-5)
PARAM_TOL = dict(rtol=1e-4, atol=1e-5)


# ---- models ----


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=32, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x.flatten(1))


class CNN(nn.Module):
    """Two conv + BatchNorm + ReLU + pooling stages on 1x8x8 images, dropout before the classifier.
    The convolutions have no bias: BatchNorm cancels it, so its gradient is rounding noise that
    AdamW would scale up to full steps (a comparison of noise, not of the device)."""

    def __init__(self, classes=10, p=0.25):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.AvgPool2d(2))
        self.dropout = nn.Dropout(p)
        self.head = nn.Linear(16 * 2 * 2, classes)

    def forward(self, x):
        return self.head(self.dropout(self.features(x).flatten(1)))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class DecoderBlock(nn.Module):
    """Token embedding, one Llama-style block (RMSNorm, rotary attention through
    F.scaled_dot_product_attention with a causal mask, SiLU-gated MLP; pre-norm residuals),
    final RMSNorm and a language-model head."""

    def __init__(self, vocab=64, dim=32, heads=4, hidden=64, max_len=32):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.attn_norm, self.mlp_norm, self.final_norm = nn.RMSNorm(dim), nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w_gate, self.w_up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = (w(x).view(b, t, self.heads, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        cos, sin = self.cos[:t], self.sin[:t]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, d))

    def forward(self, tokens):
        x = self.embed(tokens)
        x = x + self.attention(self.attn_norm(x))
        h = self.mlp_norm(x)
        x = x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))
        return self.lm_head(self.final_norm(x)).flatten(0, 1)


MODELS = {"mlp": MLP, "cnn": CNN, "decoder": DecoderBlock}
# The optimizers with PyTorch's default settings (on "hal" they take the foreach path, as on CUDA).
OPTIMIZERS = {"sgd": lambda params: torch.optim.SGD(params, lr=0.1),
              "adamw": lambda params: torch.optim.AdamW(params)}


# ---- data (CPU tensors; the training loop moves each batch) ----


def digits(steps, batch, image):
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32)
    x = (x - x.mean()) / x.std()
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[perm], y[perm]
    if image:
        x = x.view(-1, 1, 8, 8)
    return [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]) for i in range(steps)]


def token_sequences(steps, batch, seq=16, vocab=64):
    """Sequences t[i+1] = (5 t[i] + 3) mod vocab from random starts: next-token loss can fall."""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(steps):
        t = torch.randint(0, vocab, (batch, 1), generator=g)
        cols = [t]
        for _ in range(seq):
            cols.append((cols[-1] * 5 + 3) % vocab)
        s = torch.cat(cols, dim=1)
        out.append((s[:, :-1].contiguous(), s[:, 1:].reshape(-1).contiguous()))
    return out


def batches(model, steps, batch=32):
    if model == "decoder":
        return token_sequences(steps, batch // 4)
    return digits(steps, batch, image=(model == "cnn"))


# ---- dropout masks: recorded on hal, replayed on CPU ----


class _NativeDropoutMask(TorchDispatchMode):
    """Keeps the mask aten::native_dropout returns (the fused kernel every non-CPU device uses)."""

    mask = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.native_dropout.default:
            self.mask = out[1]
        return out


class DropoutMasks:
    """record(model): every nn.Dropout call of MODEL keeps its mask, in call order (checked against
    the call's own output). replay(model): MODEL's nn.Dropout calls return input * mask / (1 - p)
    with the recorded masks, in the same order."""

    def __init__(self):
        self.masks = []
        self._next = 0
        self._mode = None  # the recording mode of the nn.Dropout call in progress

    def record(self, model):
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.register_forward_pre_hook(self._start)
                m.register_forward_hook(self._keep)

    def replay(self, model):
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.register_forward_hook(self._apply)

    def close(self):
        """Leaves the recording mode of a dropout call whose forward raised (no-op otherwise)."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    def _start(self, module, inputs):
        self._mode = _NativeDropoutMask()
        self._mode.__enter__()

    def _keep(self, module, inputs, output):
        mask = self._mode.mask
        self.close()
        if not module.training:
            return
        if mask is None:
            raise RuntimeError(f"nn.Dropout on {inputs[0].device} did not call aten::native_dropout; "
                               "its mask cannot be recorded")
        x, mask, y = inputs[0].detach().cpu(), mask.cpu(), output.detach().cpu()
        torch.testing.assert_close(y, x * mask * (1.0 / (1.0 - module.p)),
                                   msg=lambda m: f"dropout output is not input * mask / (1 - p): {m}")
        self.masks.append(mask)

    def _apply(self, module, inputs, output):
        if not module.training:
            return output
        mask = self.masks[self._next]
        self._next += 1
        return inputs[0] * (mask.to(inputs[0].dtype) * (1.0 / (1.0 - module.p)))


# ---- training ----


def train(model, data, optim, device, masks=None, replay=False):
    """Plain PyTorch training on DEVICE: one optimizer step per (x, y) batch. Returns the losses."""
    if masks is not None:
        (masks.replay if replay else masks.record)(model)
    model.to(device).train()
    opt = OPTIMIZERS[optim](model.parameters())
    losses = []
    try:
        for x, y in data:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        if masks is not None:
            masks.close()
    return losses


def run(model_name, optim, steps=STEPS, device="hal"):
    """Trains MODEL_NAME with OPTIM on DEVICE and on CPU from the same initial weights (built on CPU,
    deep-copied) and batches. Returns a dict: losses per side, the final state_dicts (on CPU),
    the CPU-fallback and decomposition counts of the hal run."""
    import torch_hal

    torch.manual_seed(0)
    ref = MODELS[model_name]()
    dev = copy.deepcopy(ref)
    data = batches(model_name, steps)
    masks = DropoutMasks()
    torch_hal.reset_fallback_stats()
    dev_losses = train(dev, data, optim, device, masks)
    stats = torch_hal.fallback_stats()  # CPU fallbacks; .decompositions ran on the device
    fallbacks, decompositions = dict(stats), dict(stats.decompositions)
    cpu_losses = train(ref, data, optim, "cpu", masks, replay=True)
    assert masks._next == len(masks.masks), "the CPU run replayed a different number of dropout masks"
    return dict(model=model_name, optim=optim, device=str(next(dev.parameters()).device),
                hal=dev_losses, cpu=cpu_losses,
                hal_state={k: v.detach().cpu() for k, v in dev.state_dict().items()},
                cpu_state=dict(ref.state_dict()), fallbacks=fallbacks, decompositions=decompositions,
                dropout_masks=len(masks.masks))


def check(result):
    """Raises AssertionError naming the step or tensor where hal and CPU disagree."""
    for step, (h, c) in enumerate(zip(result["hal"], result["cpu"])):
        torch.testing.assert_close(torch.tensor(h), torch.tensor(c), **LOSS_TOL,
                                   msg=lambda m: f"{result['model']}/{result['optim']} loss at step {step}: {m}")
    assert len(result["hal"]) == len(result["cpu"])
    assert result["hal_state"].keys() == result["cpu_state"].keys()
    for name, c in result["cpu_state"].items():
        h = result["hal_state"][name]
        torch.testing.assert_close(h, c, **PARAM_TOL,
                                   msg=lambda m: f"{result['model']}/{result['optim']} final {name}: {m}")


def max_param_diff(result):
    return max((result["hal_state"][k].double() - v.double()).abs().max().item()
               for k, v in result["cpu_state"].items())


def device_index(device="hal"):
    d = torch.device(device)
    return torch.hal.current_device() if d.index is None else d.index


def describe_device(device="hal"):
    i = device_index(device)
    props = torch.hal.get_device_properties(i)
    return f"hal:{i} = {props.id} ({props.name}, {props.vendor}), plugin {props.plugin!r}"


def print_counts(what, counts):
    print(f"  {what}: {sum(counts.values())} calls of {len(counts)} aten ops"
          + "".join(f"\n    {k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp,cnn,decoder", help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--optims", default="sgd,adamw", help="comma-separated: " + ",".join(OPTIMIZERS))
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--device", default="hal")
    ap.add_argument("--expect-plugin", help="fail unless the device belongs to this plugin")
    ap.add_argument("--json", help="also write the loss curves and fallback counts here")
    args = ap.parse_args(argv)

    import torch_hal  # noqa: F401  (registers the "hal" device)

    print("device:", describe_device(args.device))
    plugin = torch.hal.get_device_properties(device_index(args.device)).plugin
    if args.expect_plugin and plugin != args.expect_plugin:
        print(f"FAIL: expected plugin {args.expect_plugin!r}, hal.toml gave {plugin!r}")
        return 1
    failures, report = 0, []
    for model in args.models.split(","):
        for optim in args.optims.split(","):
            r = run(model, optim, args.steps, args.device)
            print(f"\n{model} / {optim}: {args.steps} steps on {r['device']} and on cpu"
                  + (f" ({r['dropout_masks']} dropout masks recorded on hal, replayed on cpu)"
                     if r["dropout_masks"] else ""))
            print_counts("CPU fallbacks", r["fallbacks"])
            print_counts("decompositions (on the device)", r["decompositions"])
            print("  step   loss (hal)    loss (cpu)    |diff|")
            for i, (h, c) in enumerate(zip(r["hal"], r["cpu"])):
                print(f"  {i:4d}  {h:12.7f}  {c:12.7f}  {abs(h - c):.2e}")
            diff = max_param_diff(r)
            try:
                check(r)
                print(f"  OK: losses and final parameters agree (max |param diff| {diff:.2e})")
            except AssertionError as e:
                failures += 1
                print(f"  FAIL: {e}")
            report.append({k: r[k] for k in ("model", "optim", "device", "hal", "cpu", "fallbacks", "decompositions")}
                          | {"plugin": plugin, "max_param_diff": diff, "dropout_masks": r["dropout_masks"]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print(f"\n{len(report) - failures} of {len(report)} runs agree with PyTorch CPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
