"""The four acceptance models of issue 13, exported to ONNX by torch.onnx.export, and their inputs.

    path = export("decoder", opset=13)        # cached: ~/.cache/hal/onnx-models/torch-<version>/decoder-13.onnx
    feed = inputs("decoder", batch=2, seq=7)  # {input name: numpy array}, seeded

Two exporters: opset 13 through the TorchScript exporter (dynamo=False, dynamic_axes), and the
newest opset the dynamo exporter writes (dynamo=True, dynamic_shapes; NEWEST). Weights are seeded,
so a model file is the same for a torch version; the cache is keyed by torch version and a file is
written under a temporary name and renamed (another process never sees half a file).
"""
import math
import os
import pathlib
import tempfile
import warnings

import numpy as np
import torch
from torch import nn

NEWEST = "newest"  # the dynamo exporter's default opset
NAMES = ("mlp", "resnet", "encoder", "decoder")


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=128, d_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: two 3x3 convs with BatchNorm, a 1x1 conv + BN downsample."""

    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    """ResNet-18's topology (7x7 stem, max pool, 4 stages of 2 BasicBlocks, global pool, fc) at WIDTH channels."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, c = [], width
        for i, c_out in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(c, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c = c_out
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)
        # Non-trivial BatchNorm statistics: freshly made ones (mean 0, var 1) would hide a wrong formula.
        g = torch.Generator().manual_seed(1)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(self.layers(x)), 1))


class Encoder(nn.Module):
    """nn.TransformerEncoder: 2 post-norm layers, 4 heads, ReLU feed-forward, no dropout at inference."""

    def __init__(self, d=32, heads=4, ff=64, layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, max_len):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class DecoderBlock(nn.Module):
    def __init__(self, d, heads, max_len):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, max_len)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    """GPT-2 shaped: token + position embedding, pre-norm blocks, final LayerNorm, LM head. Input: int64 ids [b, t]."""

    def __init__(self, vocab=96, d=32, heads=4, layers=2, max_len=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.Sequential(*[DecoderBlock(d, heads, max_len) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        return self.head(self.ln(self.blocks(x)))


_MODELS = {"mlp": MLP, "resnet": ResNet18, "encoder": Encoder, "decoder": Decoder}
_INPUT_NAMES = {"mlp": "x", "resnet": "image", "encoder": "x", "decoder": "ids"}


def inputs(name, batch=2, seq=8, seed=0):
    """{input name: numpy array} for model NAME: batch BATCH, sequence length SEQ (encoder, decoder)."""
    rng = np.random.default_rng(seed)
    if name == "mlp":
        x = rng.standard_normal((batch, 64), dtype=np.float32)
    elif name == "resnet":
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
    elif name == "encoder":
        x = rng.standard_normal((batch, seq, 32), dtype=np.float32)
    elif name == "decoder":
        x = rng.integers(0, 96, (batch, seq), dtype=np.int64)
    else:
        raise KeyError(name)
    return {_INPUT_NAMES[name]: x}


def build(name):
    """Model NAME in eval mode with seeded weights."""
    torch.manual_seed(0)
    return _MODELS[name]().eval()


def cache_dir():
    root = os.environ.get("HAL_ONNX_MODEL_CACHE") or os.path.expanduser("~/.cache/hal/onnx-models")
    return pathlib.Path(root) / f"torch-{torch.__version__}"


def export(name, opset, directory=None):
    """The path of model NAME exported at OPSET (13 or NEWEST), exporting it on first use."""
    directory = pathlib.Path(directory) if directory else cache_dir()
    path = directory / f"{name}-{opset}.onnx"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    model = build(name)
    feed = inputs(name)
    (input_name,) = feed
    args = (torch.from_numpy(feed[input_name]),)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=directory)
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if opset == NEWEST:
                dims = {0: torch.export.Dim("batch", max=1024)}
                if name in ("encoder", "decoder"):
                    dims[1] = torch.export.Dim("seq", min=2, max=64)
                program = torch.onnx.export(model, args, dynamo=True, input_names=[input_name],
                                            output_names=["out"], dynamic_shapes={_arg_name(name): dims},
                                            verbose=False)
                program.save(tmp, external_data=False)
            else:
                _sdpa_symbolic_for(opset)
                # nn.MultiheadAttention traced by the TorchScript exporter bakes batch and sequence length
                # into its reshapes (ORT refuses another shape): the encoder is static at this opset.
                axes = {} if name == "encoder" else {0: "batch"}
                if name == "decoder":
                    axes[1] = "seq"
                torch.onnx.export(model, args, tmp, dynamo=False, opset_version=opset, input_names=[input_name],
                                  output_names=["out"], dynamic_axes={input_name: axes, "out": dict(axes)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _sdpa_symbolic_for(opset):
    """nn.MultiheadAttention calls scaled_dot_product_attention, which the TorchScript exporter knows from
    opset 14 on; its opset-14 translation uses only opset-13 operators when no causal flag is set
    (MatMul, Softmax, Mul, Sqrt, ...), so it is registered for 13 too."""
    if opset < 14:
        from torch.onnx._internal.torchscript_exporter import symbolic_opset14

        torch.onnx.register_custom_op_symbolic("aten::scaled_dot_product_attention",
                                               symbolic_opset14.scaled_dot_product_attention, opset)


def static_shape(name, opset):
    """True when model NAME exported at OPSET takes only the shape of inputs(NAME) (see export())."""
    return name == "encoder" and opset != NEWEST


def _arg_name(name):
    return {"mlp": "x", "resnet": "x", "encoder": "x", "decoder": "ids"}[name]
