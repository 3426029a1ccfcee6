#!/usr/bin/env python3
"""Makes the real-export test models of tests/data/onnx/exports/ (tests/test_onnx_exports.cpp).

Small BERT and GPT-2 configs with random weights go through transformers and torch.onnx the way
a user exports them: the TorchScript exporter (dynamo=False) at opsets 14 and 17 and the dynamo
exporter at opset 18 (its lowest; asked for 17 it leaves opset-18 attributes behind), with
static and with dynamic (batch, sequence) axes. Each model directory holds
model.onnx (weights inline), and per input set K the inputs in_K_NAME.npy and PyTorch's output
out_K.npy; a dynamic model gets two sets of different shapes. ONNX Runtime, when installed, is
checked against PyTorch here too. CI needs neither torch nor the network: the files are committed.

Needs torch >= 2, transformers, onnx, onnxscript (and optionally onnxruntime), e.g. the peer kit's
venv: ../shared/peers/setup_torch2.sh, then
  $VENV/bin/pip install transformers onnx onnxscript onnxruntime
  $VENV/bin/python scripts/make_onnx_exports.py [OUT_DIR]
GPT-2's TorchScript export is left out: transformers' mask code calls aten::diff, which that
exporter cannot export at any opset.
"""
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

warnings.filterwarnings("ignore")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "onnx", "exports")


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=64)
        self.m = BertModel(cfg).eval()

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.m = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False).logits


def inputs_for(names, batch, seq, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 100, (batch, seq), generator=g)
    if names == ["input_ids"]:
        return (ids,)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[batch - 1, seq - seq // 4:] = 0  # the last row is padded
    return (ids, mask)


def export(name, module, names, exporter, opset, dynamic):
    args = inputs_for(names, 2, 16, 7)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        if exporter == "torchscript":
            axes = {n: {0: "batch", 1: "sequence"} for n in names} if dynamic else None
            torch.onnx.export(module, args, path, input_names=names, output_names=["out"], opset_version=opset,
                              dynamo=False, dynamic_axes=axes)
        else:
            shapes = None
            if dynamic:
                b, s = torch.export.Dim("batch", max=64), torch.export.Dim("sequence", max=64)
                shapes = tuple({0: b, 1: s} for _ in names)
            torch.onnx.export(module, args, path, input_names=names, output_names=["out"], opset_version=opset,
                              dynamo=True, dynamic_shapes=shapes)
        model = onnx.load(path)  # pulls in external data
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))  # weights inline
    sets = [(2, 16, 7)] + ([(1, 9, 8)] if dynamic else [])
    for k, (batch, seq, seed) in enumerate(sets):
        inp = inputs_for(names, batch, seq, seed)
        with torch.no_grad():
            out = module(*inp).numpy()
        for n, t in zip(names, inp):
            np.save(os.path.join(d, f"in_{k}_{n}.npy"), t.numpy())
        np.save(os.path.join(d, f"out_{k}.npy"), out)
        try:
            import onnxruntime as ort
            sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
            got = sess.run(None, {n: t.numpy() for n, t in zip(names, inp)})[0]
            err = float(np.abs(got - out).max())
            print(f"{name} set {k} {list(out.shape)}: onnxruntime vs torch max abs diff {err:.2e}")
        except ImportError:
            pass
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}: opset {model.opset_import[0].version}, {os.path.getsize(os.path.join(d, 'model.onnx'))} bytes, ops {ops}")


def main():
    bert, gpt2 = Bert().eval(), Gpt2().eval()  # export() restores the mode it found: dropout stays off
    bn, gn = ["input_ids", "attention_mask"], ["input_ids"]
    export("bert_torchscript_opset14", bert, bn, "torchscript", 14, False)
    export("bert_torchscript_opset17_dynamic", bert, bn, "torchscript", 17, True)
    export("bert_dynamo", bert, bn, "dynamo", 18, False)
    export("bert_dynamo_dynamic", bert, bn, "dynamo", 18, True)
    export("gpt2_dynamo", gpt2, gn, "dynamo", 18, False)
    export("gpt2_dynamo_dynamic", gpt2, gn, "dynamo", 18, True)


if __name__ == "__main__":
    main()
