"""TinyLM in PyTorch: the peer of `volta bench train` and `volta bench infer` (batch 1).

Same model and step as Volta's shakespeare-char recipe (src/train/lm.cpp, src/model/tinylm.cpp):
4 layers, 4 heads, 128 channels, context 64, batch 12, char-level vocab of data/tinyshakespeare.txt
(65), pre-LayerNorm, exact GELU, 4x MLP, tied LM head, no biases; weights stored (in, out) and
applied as x @ W like Volta's; AdamW lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on matrices
only, gradient clipping at norm 1.0, warmup-cosine learning rate.

Timed like cmd_bench.cpp: `warmup` untimed repetitions, then the median (sorted[n // 2]) of the
timed ones.
  train : one step = zero_grad + forward + loss + backward + clip + AdamW, on a fresh batch.
  decode: greedy from a one-token prompt up to the full context (63 new tokens, one forward
          each), batch 1, with the KV cache (preallocated) and without it (full recompute).

Run with Debian's torch: /usr/bin/python3 bench/torch_tinylm.py --threads 1
Output: one JSON object per line with volta's keys (ms_per_step, tokens_per_s;
batch, kv_cache, decode_tokens_per_s).
"""
import argparse
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10, help="timed training steps")
    p.add_argument("--runs", type=int, default=5, help="timed decode runs")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps / runs first")
    p.add_argument("--data", default="data/tinyshakespeare.txt")
    p.add_argument("--only", choices=["all", "train", "infer"], default="all")
    return p.parse_args()


ARGS = parse_args()
# Before torch loads: its OpenMP pool and OpenBLAS read these once.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(ARGS.threads))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(f"torch_tinylm.py: {sys.executable} cannot import torch "
             "(apt-get install -y python3-torch, and run it with /usr/bin/python3)")

torch.set_num_threads(ARGS.threads)

LAYERS, HEADS, CHANNELS, CONTEXT, BATCH = 4, 4, 128, 64, 12
LR, MIN_LR, WARMUP_STEPS, DECAY_STEPS = 1e-3, 1e-4, 100, 2000


class TinyLM(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        C = CHANNELS
        proj_std = 0.02 / math.sqrt(2 * LAYERS)

        def matrix(rows, cols, std):
            return torch.nn.Parameter(torch.randn(rows, cols) * std)

        def gain():
            return torch.nn.Parameter(torch.ones(C))

        self.wte = matrix(vocab, C, 0.02)      # (V, C), also the LM head
        self.wpe = matrix(CONTEXT, C, 0.02)    # (ctx, C)
        self.ln1 = torch.nn.ParameterList([gain() for _ in range(LAYERS)])
        self.wqkv = torch.nn.ParameterList([matrix(C, 3 * C, 0.02) for _ in range(LAYERS)])
        self.wo = torch.nn.ParameterList([matrix(C, C, proj_std) for _ in range(LAYERS)])
        self.ln2 = torch.nn.ParameterList([gain() for _ in range(LAYERS)])
        self.w_fc = torch.nn.ParameterList([matrix(C, 4 * C, 0.02) for _ in range(LAYERS)])
        self.w_proj = torch.nn.ParameterList([matrix(4 * C, C, proj_std) for _ in range(LAYERS)])
        self.lnf = gain()
        # causal[t, s]: position t may attend to position s
        self.register_buffer("causal", torch.ones(CONTEXT, CONTEXT, dtype=torch.bool).tril(), persistent=False)

    def forward(self, tokens, pos=0, cache=None):
        """tokens (B, T) at positions pos..pos+T-1 -> logits (B, T, V).

        With cache = [(k, v)] per layer, each (B, H, CONTEXT, hd): attention also sees
        positions 0..pos-1 there, and this call writes its own keys and values into it."""
        B, T = tokens.shape
        C, H = CHANNELS, HEADS
        hd = C // H
        x = self.wte[tokens] + self.wpe[pos:pos + T]                      # (B, T, C)
        for l in range(LAYERS):
            h = F.layer_norm(x, (C,), self.ln1[l], None, 1e-5)
            q, k, v = (h @ self.wqkv[l]).split(C, dim=2)                    # 3 x (B, T, C)
            q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
            if cache is not None:
                ck, cv = cache[l]
                ck[:, :, pos:pos + T] = k
                cv[:, :, pos:pos + T] = v
                k, v = ck[:, :, :pos + T], cv[:, :, :pos + T]               # (B, H, S, hd)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))         # (B, H, T, S)
            if T > 1:  # one query (decode) sees every cached key
                att = att.masked_fill(~self.causal[pos:pos + T, :pos + T], float("-inf"))
            y = att.softmax(dim=-1) @ v                                     # (B, H, T, hd)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + y @ self.wo[l]
            h2 = F.layer_norm(x, (C,), self.ln2[l], None, 1e-5)
            x = x + F.gelu(h2 @ self.w_fc[l]) @ self.w_proj[l]              # (B, T, C)
        x = F.layer_norm(x, (C,), self.lnf, None, 1e-5)
        return x @ self.wte.t()                                             # (B, T, V)


def load_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"torch_tinylm.py: cannot read {path}: {e.strerror} (run from the repository root or pass --data)")
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([index[ch] for ch in text], dtype=torch.long)
    return data[:int(0.9 * len(data))], len(chars)


def lr_at(step):
    if step < WARMUP_STEPS:
        return LR * (step + 1) / WARMUP_STEPS
    progress = min(1.0, (step - WARMUP_STEPS) / max(1, DECAY_STEPS - WARMUP_STEPS))
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def median(xs):
    return sorted(xs)[len(xs) // 2]  # cmd_bench.cpp's median


def emit(**row):
    print(json.dumps(row), flush=True)


def bench_train(model, train_data, gen):
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    gains = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                             {"params": gains, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.99), eps=1e-8, foreach=True)
    ms = []
    for step in range(ARGS.warmup + ARGS.steps):
        starts = torch.randint(len(train_data) - CONTEXT - 1, (BATCH,), generator=gen)
        x = torch.stack([train_data[s:s + CONTEXT] for s in starts])
        y = torch.stack([train_data[s + 1:s + 1 + CONTEXT] for s in starts])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.step()
        if step >= ARGS.warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    med = median(ms)
    emit(bench="train", recipe="shakespeare-char", threads=ARGS.threads, ms_per_step=med,
         tokens_per_s=BATCH * CONTEXT / (med / 1e3), steps=ARGS.steps, loss=loss.item(),
         backend=f"torch-{torch.__version__}")


@torch.inference_mode()
def generate(model, n_new, kv_cache):
    """Greedy decode, batch 1, from the prompt [0]: n_new tokens, one forward each."""
    hd = CHANNELS // HEADS
    tokens = torch.zeros(1, 1, dtype=torch.long)
    cache = [(torch.empty(1, HEADS, CONTEXT, hd), torch.empty(1, HEADS, CONTEXT, hd))
             for _ in range(LAYERS)] if kv_cache else None
    for pos in range(n_new):
        if kv_cache:
            logits = model(tokens[:, pos:pos + 1], pos, cache)
        else:
            logits = model(tokens)
        tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens


def bench_infer(model):
    n_new = CONTEXT - 1
    # A wrong cache would be fast and wrong: both paths must pick the same tokens.
    if not torch.equal(generate(model, n_new, True), generate(model, n_new, False)):
        print("torch_tinylm.py: warning: KV-cache and recompute decode disagree", file=sys.stderr)
    for kv in (True, False):
        secs = []
        for r in range(ARGS.warmup + ARGS.runs):
            t0 = time.perf_counter()
            generate(model, n_new, kv)
            if r >= ARGS.warmup:
                secs.append(time.perf_counter() - t0)
        emit(bench="infer", batch=1, kv_cache=kv, decode_tokens_per_s=n_new / median(secs),
             threads=ARGS.threads, context=CONTEXT, backend=f"torch-{torch.__version__}")


def main():
    if ARGS.threads < 1 or ARGS.steps < 1 or ARGS.runs < 1 or ARGS.warmup < 0:
        sys.exit("torch_tinylm.py: --threads, --steps and --runs must be >= 1, --warmup >= 0")
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)
    train_data, vocab = load_text(ARGS.data)
    model = TinyLM(vocab)
    if ARGS.only in ("all", "train"):
        bench_train(model, train_data, gen)
    if ARGS.only in ("all", "infer"):
        bench_infer(model)


if __name__ == "__main__":
    main()
