"""A BERT-style encoder exported by torch.onnx.export (both exporters) runs through hal.onnx like
onnxruntime at two batch sizes and two sequence lengths: word + position + token-type embeddings, the
extended attention mask arithmetic ((1 - mask) * large negative), multi-head self-attention written out,
GELU feed-forward, post-norm residuals, the pooler's tanh over [CLS]."""
import io
import math

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

import hal
import hal.onnx

VOCAB, HIDDEN, HEADS, LAYERS, MAX_POS, TYPES = 100, 32, 4, 2, 64, 2


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.ff1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.ff2 = nn.Linear(4 * HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, h, bias):
        b, s, _ = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        h = self.ln1(h + self.out(ctx))
        return self.ln2(h + self.ff2(nn.functional.gelu(self.ff1(h))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(MAX_POS, HIDDEN)
        self.token_type = nn.Embedding(TYPES, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.pool = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, token_type_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        h = self.ln(self.word(input_ids) + self.pos(positions) + self.token_type(token_type_ids))
        bias = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        for layer in self.layers:
            h = layer(h, bias)
        return h, torch.tanh(self.pool(h[:, 0]))


def inputs(batch, seq, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, (batch, seq)).astype(np.int64)
    types = (np.arange(seq)[None, :] >= seq // 2).astype(np.int64).repeat(batch, 0)
    mask = np.ones((batch, seq), np.int64)
    for b in range(batch):
        mask[b, seq - b % seq:] = 0 if b else 1  # padded rows of different lengths
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


@pytest.mark.parametrize("exporter", ["torchscript-14", "dynamo"])
def test_bert_style_encoder_like_onnxruntime(exporter, cpu_options, tmp_path):
    torch.manual_seed(0)
    net = Bert().eval()
    example = tuple(torch.from_numpy(v) for v in inputs(2, 8, 0).values())
    names = ["input_ids", "token_type_ids", "attention_mask"]
    path = tmp_path / "bert.onnx"
    if exporter == "dynamo":
        batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", min=2, max=MAX_POS)
        torch.onnx.export(net, example, dynamo=True, input_names=names, output_names=["hidden", "pooled"],
                          dynamic_shapes=tuple({0: batch, 1: seq} for _ in names)).save(str(path))
    else:
        torch.onnx.export(net, example, str(path), dynamo=False, opset_version=14, input_names=names,
                          output_names=["hidden", "pooled"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    sess = hal.onnx.InferenceSession(str(path), cpu_options)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, seq in ((1, 8), (4, 8), (3, 13)):
        feeds = inputs(batch, seq, batch * 100 + seq)
        got = sess.run(None, feeds)
        for g, w in zip(got, want.run(None, feeds)):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        with torch.no_grad():
            ref = net(*(torch.from_numpy(v) for v in feeds.values()))
        np.testing.assert_allclose(got[1], ref[1].numpy(), rtol=1e-4, atol=1e-4)
