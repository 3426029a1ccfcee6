#!/usr/bin/env python3
"""Cross-runtime check of `volta export`: the exported TinyLM runs in ONNX Runtime and gives the
logits `volta run` gives on the same file and tokens.

Usage (ONNX Runtime from ../shared/peers/setup_ort.sh):
  $VOLTA_PEERS_DIR/venv/ort/bin/python bench/onnx_export_ort.py build/release/volta CKPT [--batch 2] [--seq 64]
Prints the ONNX checker verdict (full_check, the newest onnx), the max abs / rel logits
difference and the greedy next-token agreement; exits non-zero when they disagree.
"""
import argparse, os, subprocess, sys, tempfile

import numpy as np
import onnx
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("volta")
    ap.add_argument("checkpoint")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.onnx")
        cmd = [a.volta, "export", "--checkpoint", a.checkpoint, "--onnx", model, "--batch", str(a.batch)]
        if a.seq:
            cmd += ["--seq", str(a.seq)]
        print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip())
        m = onnx.load(model)
        onnx.checker.check_model(m, full_check=True)
        print(f"onnx {onnx.__version__} checker (full_check): ok")
        meta = {p.key: p.value for p in m.metadata_props}
        shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
        vocab = m.graph.output[0].type.tensor_type.shape.dim[2].dim_value
        tokens = np.random.default_rng(a.seed).integers(0, vocab, size=shape, dtype=np.int32)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        subprocess.run([a.volta, "run", model, "--input", f"tokens={d}/tokens.npy", "--output", os.path.join(d, "out")],
                       check=True, capture_output=True)
        volta = np.load(os.path.join(d, "out", "logits.npy"))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        theirs = sess.run(["logits"], {"tokens": tokens})[0]
        diff = np.abs(volta - theirs)
        rel = float((diff / (1 + np.abs(theirs))).max())
        agree = float((volta.argmax(-1) == theirs.argmax(-1)).mean())
        print(f"onnxruntime {ort.__version__}: logits {list(theirs.shape)}, max abs diff {diff.max():.3g}, "
              f"max rel {rel:.3g}, greedy next-token agreement {agree:.4f}")
        print(f"metadata keys: {sorted(meta)}")
        return 0 if rel < 1e-4 and agree == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
