#!/usr/bin/env python3
"""Trains a small MLP classifier on scikit-learn's handwritten digits (8x8 images, shipped with the
package) entirely through HAL catalog ops on one device — forward, loss, backward and SGD — and the
same model in PyTorch from the same initial weights and batches. Prints both loss curves and test
accuracies; exits non-zero if they disagree.

    PYTHONPATH=<build>/python python framework_bridge/python/examples/mlp_digits.py [--device cpu:0]

Everything stays in device memory except each batch's inputs (copied in) and the per-epoch loss
and predictions (copied out for printing).
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

import hal
from hal import torch_util as tu


def load_data():
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    x, y = x[perm], y[perm]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


class HalMLP:
    """784-free MLP 64 -> HIDDEN -> 10 whose parameters and activations live on a HAL device."""

    def __init__(self, dev, params, batch):
        self.dev = dev
        self.p = {k: tu.to_hal(dev, v) for k, v in params.items()}
        self.g = {k: hal.Tensor.empty(dev, list(v.shape), "float32") for k, v in params.items()}
        hidden = params["w1"].shape[0]
        empty = lambda *s: hal.Tensor.empty(dev, list(s), "float32")  # noqa: E731
        self.h, self.a, self.logits = empty(batch, hidden), empty(batch, hidden), empty(batch, 10)
        self.loss, self.one = empty(), tu.to_hal(dev, torch.tensor(1.0))
        self.g_logits, self.g_a, self.g_h, self.g_x = empty(batch, 10), empty(batch, hidden), empty(batch, hidden), \
            empty(batch, 64)
        self.pred = hal.Tensor.empty(dev, [batch], "int64")
        ops = ["linear", "relu", "cross_entropy", "cross_entropy_backward", "linear_backward", "relu_backward", "sub",
               "argmax"]
        self.op = {name: hal.Op(dev, name) for name in ops}

    def forward(self, x, y):
        o, p = self.op, self.p
        o["linear"]([x, p["w1"], p["b1"]], [self.h])
        o["relu"]([self.h], [self.a])
        o["linear"]([self.a, p["w2"], p["b2"]], [self.logits])
        o["cross_entropy"]([self.logits, y], [self.loss])

    def backward_and_step(self, x, y, lr):
        o, p, g = self.op, self.p, self.g
        o["cross_entropy_backward"]([self.one, self.logits, y], [self.g_logits])
        o["linear_backward"]([self.g_logits, self.a, p["w2"]], [self.g_a, g["w2"], g["b2"]])
        o["relu_backward"]([self.g_a, self.h], [self.g_h])
        o["linear_backward"]([self.g_h, x, p["w1"]], [self.g_x, g["w1"], g["b1"]])
        for k in p:  # SGD in place: p = p - lr * g
            o["sub"]([p[k], g[k]], [p[k]], {"alpha": lr})

    def predict(self, x):
        self.forward_logits(x)
        self.op["argmax"]([self.logits], [self.pred], {"dim": 1})
        return tu.to_torch(self.pred)

    def forward_logits(self, x):
        o, p = self.op, self.p
        o["linear"]([x, p["w1"], p["b1"]], [self.h])
        o["relu"]([self.h], [self.a])
        o["linear"]([self.a, p["w2"], p["b2"]], [self.logits])


def torch_step(params, x, y, lr):
    h = F.relu(F.linear(x, params["w1"], params["b1"]))
    loss = F.cross_entropy(F.linear(h, params["w2"], params["b2"]), y)
    grads = torch.autograd.grad(loss, list(params.values()))
    with torch.no_grad():
        for (k, v), gk in zip(params.items(), grads):
            v.sub_(lr * gk)
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="HAL device (default: the configuration's default device)")
    ap.add_argument("--config", default=None, help="hal.toml to load plugins from")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.5)
    args = ap.parse_args()

    rt = hal.Runtime(config=args.config)
    dev = rt.device(args.device) if args.device else rt.devices()[0]
    (x_train, y_train), (x_test, y_test) = load_data()
    torch.manual_seed(0)
    init = {"w1": torch.randn(args.hidden, 64) * (1 / 8), "b1": torch.zeros(args.hidden),
            "w2": torch.randn(10, args.hidden) * (1 / args.hidden ** 0.5), "b2": torch.zeros(10)}
    ref = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    model = HalMLP(dev, init, args.batch)
    print(f"MLP 64-{args.hidden}-10 on digits ({len(x_train)} train, {len(x_test)} test images) on HAL device "
          f"{dev.id} ({dev.name}), against PyTorch {torch.__version__} CPU")
    print(f"{'epoch':>5} {'HAL loss':>10} {'torch loss':>10}")
    batches = len(x_train) // args.batch
    start = time.perf_counter()
    worst = 0.0
    for epoch in range(args.epochs):
        hal_loss = torch_loss = 0.0
        for i in range(batches):
            xb = x_train[i * args.batch:(i + 1) * args.batch]
            yb = y_train[i * args.batch:(i + 1) * args.batch]
            hx, hy = tu.to_hal(dev, xb), tu.to_hal(dev, yb)
            model.forward(hx, hy)
            hal_loss += tu.to_torch(model.loss).item()
            model.backward_and_step(hx, hy, args.lr)
            torch_loss += torch_step(ref, xb, yb, args.lr)
        hal_loss, torch_loss = hal_loss / batches, torch_loss / batches
        worst = max(worst, abs(hal_loss - torch_loss))
        print(f"{epoch + 1:>5} {hal_loss:>10.5f} {torch_loss:>10.5f}")
    seconds = time.perf_counter() - start

    def accuracy(pred):
        return (pred == y_test[:len(pred)]).float().mean().item()

    n_test = (len(x_test) // args.batch) * args.batch
    hal_pred = torch.cat([model.predict(tu.to_hal(dev, x_test[i:i + args.batch]))
                          for i in range(0, n_test, args.batch)])
    with torch.no_grad():
        h = F.relu(F.linear(x_test[:n_test], ref["w1"], ref["b1"]))
        torch_pred = F.linear(h, ref["w2"], ref["b2"]).argmax(1)
    hal_acc, torch_acc = accuracy(hal_pred), accuracy(torch_pred)
    print(f"test accuracy: HAL {hal_acc:.4f}, torch {torch_acc:.4f} ({n_test} images); "
          f"training (HAL and torch together) {seconds:.2f} s")
    ok = worst < 1e-3 and abs(hal_acc - torch_acc) <= 0.01 and hal_acc > 0.9
    print("OK: HAL matches PyTorch" if ok else f"MISMATCH: worst loss difference {worst:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
