"""GPU peers for scripts/gpu_check.sh, one JSON object per line, fp32 with TF32 off:
  matmul: cuBLAS SGEMM through PyTorch on the suite of `volta bench matmul`, timed with CUDA events;
  train:  the training step of Volta's TinyLM (same architecture and optimizer settings as
          `volta bench train`) in PyTorch eager and torch.compile, ms per step;
  decode: greedy decode with a KV cache in PyTorch eager, tokens/s (as `volta bench infer --kv-cache on`).

Usage: python3 bench/gpu_peer.py matmul [--runs 5]
       python3 bench/gpu_peer.py decode --batch 1 [--runs 5 --warmup 2]
       python3 bench/gpu_peer.py train --mode eager|compile [--layers 4 --heads 4 --channels 128
                                       --context 64 --batch 12] [--steps 50 --warmup 10]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SUITE = [  # cmd_bench.cpp's gemm_suite(), the peers' shapes
    ("square", 64, 64, 64), ("square", 128, 128, 128), ("square", 256, 256, 256),
    ("square", 512, 512, 512), ("square", 1024, 1024, 1024), ("square", 2048, 2048, 2048),
    ("tiny-gpt", 768, 384, 128), ("tiny-gpt", 768, 512, 128), ("tiny-gpt", 768, 128, 512),
    ("tiny-gpt", 768, 65, 128), ("decode", 1, 384, 128), ("decode", 1, 512, 128),
    ("decode", 1, 128, 512), ("decode", 1, 65, 128), ("big-gpt", 16384, 1152, 384),
    ("big-gpt", 16384, 1536, 384), ("big-gpt", 16384, 384, 1536), ("big-gpt", 16384, 65, 384),
]


def bench_matmul(runs):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(1)
    for group, m, n, k in SUITE:
        a = torch.randn(m, k, device="cuda", generator=gen)
        b = torch.randn(k, n, device="cuda", generator=gen)
        c = torch.empty(m, n, device="cuda")
        flop = 2.0 * m * n * k
        reps = int(min(max(2e10 / flop, 1), 100000))
        samples = []
        for r in range(2 + runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            if r >= 2:
                samples.append(flop * reps / (start.elapsed_time(end) / 1e3) / 1e9)
        samples.sort()
        print(json.dumps({"bench": "matmul", "peer": "cublas-torch-fp32", "group": group, "m": m, "n": n, "k": k,
                          "gflops": samples[len(samples) // 2], "torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name()}), flush=True)


class Block(nn.Module):
    """Volta's TinyLM block: pre-LayerNorm (no biases), one qkv matmul, causal attention, 4x MLP
    with exact GELU."""

    def __init__(self, C, H, attention):
        super().__init__()
        self.H, self.attention = H, attention
        self.ln1 = nn.LayerNorm(C, eps=1e-5, bias=False)
        self.qkv = nn.Linear(C, 3 * C, bias=False)
        self.wo = nn.Linear(C, C, bias=False)
        self.ln2 = nn.LayerNorm(C, eps=1e-5, bias=False)
        self.fc = nn.Linear(C, 4 * C, bias=False)
        self.proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(C, dim=2))
        if self.attention == "sdpa":  # PyTorch's fused attention (the efficient kernel for fp32)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # the same ops as Volta's training graph
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, V, T, L, H, C, attention):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H, attention) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if name.endswith(("wo.weight", "proj.weight")) else 0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def bench_train(a):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    dev = "cuda"
    model = TinyLM(65, a.context, a.layers, a.heads, a.channels, a.attention).to(dev)
    # The recipe's AdamW: lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on matrices only; clip 1.0.
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    loss_fn = torch.compile(model) if a.mode == "compile" else model
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randint(65, (a.batch, a.context), generator=gen).to(dev),
                torch.randint(65, (a.batch, a.context), generator=gen).to(dev)) for _ in range(8)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, norm

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    # Each step waits for its loss and norm, as `volta bench train` does ...
    ms = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        loss, norm = step(i)
        loss.item(), norm.item()
        ms.append((time.perf_counter() - t0) * 1e3)
    # ... and the steps queued back to back with one wait at the end, PyTorch's usual loop.
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(i)
    torch.cuda.synchronize()
    pipelined = (time.perf_counter() - t0) * 1e3 / a.steps
    med = statistics.median(ms)
    print(json.dumps({"bench": "train", "peer": f"torch-{a.mode}-{a.attention}", "layers": a.layers, "heads": a.heads,
                      "channels": a.channels, "context": a.context, "batch": a.batch, "ms_per_step": med,
                      "ms_per_step_pipelined": pipelined, "tokens_per_s": a.batch * a.context / (med / 1e3),
                      "tf32": torch.backends.cuda.matmul.allow_tf32, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name()}), flush=True)


@torch.no_grad()
def bench_decode(a):
    """Greedy decode with a KV cache, as `volta bench infer --kv-cache on`: a one-token prompt, then
    context - 1 tokens, each step one token per sequence; tokens/s over the whole generation."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(1)
    dev = "cuda"
    m = TinyLM(65, a.context, a.layers, a.heads, a.channels, "sdpa").to(dev).eval()
    B, H, C, T = a.batch, a.heads, a.channels, a.context
    D = C // H

    def generate():
        ks = [torch.zeros(B, H, T, D, device=dev) for _ in m.blocks]
        vs = [torch.zeros(B, H, T, D, device=dev) for _ in m.blocks]
        tok = torch.zeros(B, 1, dtype=torch.long, device=dev)
        for pos in range(T - 1):
            x = m.wte(tok) + m.wpe.weight[pos]
            for blk, kc, vc in zip(m.blocks, ks, vs):
                q, k, v = (t.view(B, 1, H, D).transpose(1, 2) for t in blk.qkv(blk.ln1(x)).split(C, dim=2))
                kc[:, :, pos:pos + 1] = k
                vc[:, :, pos:pos + 1] = v
                y = F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1])
                x = x + blk.wo(y.transpose(1, 2).reshape(B, 1, C))
                x = x + blk.proj(F.gelu(blk.fc(blk.ln2(x))))
            logits = F.linear(m.lnf(x), m.wte.weight)
            tok = logits.argmax(-1)
            tok.cpu()  # each token is read back, as a sampler on the host does
        return T - 1

    for _ in range(a.warmup):
        generate()
    secs = []
    for _ in range(a.runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = generate()
        torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
    med = statistics.median(secs)
    print(json.dumps({"bench": "decode", "peer": "torch-eager-sdpa-kvcache", "batch": B, "context": T,
                      "decode_tokens_per_s": B * n / med, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name()}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["matmul", "train", "decode"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--attention", choices=["sdpa", "unfused"], default="sdpa")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    args = p.parse_args()
    if args.what == "matmul":
        bench_matmul(args.runs)
    elif args.what == "decode":
        bench_decode(args)
    else:
        bench_train(args)
