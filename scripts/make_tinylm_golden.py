#!/usr/bin/python3
"""Writes tests/golden/tinylm_golden.safetensors (gpt) or tinylm_llama_golden.safetensors (llama):
an independent PyTorch TinyLM as the reference.

Run by developers (Debian's python3-torch), not by CI:
  /usr/bin/python3 scripts/make_tinylm_golden.py [gpt|llama]

The file is a Volta checkpoint container (safetensors + __metadata__, format volta.checkpoint v1)
whose "golden" metadata holds the magic "tinylm-golden", a version, the model config, the batch,
the optimizer settings, the loss and the losses of 10 AdamW steps. Tensors: tokens, targets,
every parameter (Volta names and layouts: linear weights as [in, out]), logits, and the gradient
of the loss w.r.t. every parameter as "grad.<name>".
"""
import json, math, os, struct, sys
import torch
import torch.nn.functional as F

VARIANT = sys.argv[1] if len(sys.argv) > 1 else "gpt"
assert VARIANT in ("gpt", "llama"), "variant: gpt or llama"
torch.manual_seed(1234)
V, T, L, H, C, B = 13, 8, 2, 2, 16, 2
if VARIANT == "llama":
    H, KV, FFN, THETA = 4, 2, 24, 10000.0
LR, BETAS, WD, EPS, CLIP, STEPS = 1e-2, (0.9, 0.99), 0.1, 1e-8, 1.0, 10

def normal(*shape, std):
    return (torch.randn(*shape, dtype=torch.float64) * std).float().requires_grad_()

# Parameters in Volta's names and layouts (x @ W with W [in, out]).
P = {"wte": normal(V, C, std=0.3), "wpe": normal(T, C, std=0.3)}
if VARIANT == "llama":
    hd = C // H
    P = {"wte": normal(V, C, std=0.3)}
    for l in range(L):
        P[f"h{l}.ln1.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()
        P[f"h{l}.attn.wqkv"] = normal(C, C + 2 * KV * hd, std=0.3)
        P[f"h{l}.attn.wo"] = normal(C, C, std=0.3)
        P[f"h{l}.ln2.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()
        P[f"h{l}.mlp.w_gate_up"] = normal(C, 2 * FFN, std=0.3)
        P[f"h{l}.mlp.w_down"] = normal(FFN, C, std=0.2)
    P["lnf.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()
    P["w_head"] = normal(C, V, std=0.3)
for l in range(L if VARIANT == "gpt" else 0):
    P[f"h{l}.ln1.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()
    P[f"h{l}.attn.wqkv"] = normal(C, 3 * C, std=0.3)
    P[f"h{l}.attn.wo"] = normal(C, C, std=0.3)
    P[f"h{l}.ln2.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()
    P[f"h{l}.mlp.w_fc"] = normal(C, 4 * C, std=0.3)
    P[f"h{l}.mlp.w_proj"] = normal(4 * C, C, std=0.2)
if VARIANT == "gpt":
    P["lnf.g"] = (1 + 0.1 * torch.randn(C)).requires_grad_()

tokens = torch.randint(0, V, (B, T))
targets = torch.randint(0, V, (B, T))

def rms_norm(x, g, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

def forward_llama(P):
    # Rotary tables as Hugging Face Llama builds them (cat(freqs, freqs)), in float64 rounded to f32.
    inv_freq = THETA ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    cos, sin = torch.cat((freqs, freqs), -1).cos().float(), torch.cat((freqs, freqs), -1).sin().float()
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens]
    for l in range(L):
        h = rms_norm(x, P[f"h{l}.ln1.g"])
        q, k, v = (h @ P[f"h{l}.attn.wqkv"]).split([C, KV * hd, KV * hd], dim=2)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k, v = (z.view(B, T, KV, hd).transpose(1, 2) for z in (k, v))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)  # query head h reads kv head h // (H/KV)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ P[f"h{l}.attn.wo"]
        gate, up = (rms_norm(x, P[f"h{l}.ln2.g"]) @ P[f"h{l}.mlp.w_gate_up"]).split(FFN, dim=2)
        x = x + (F.silu(gate) * up) @ P[f"h{l}.mlp.w_down"]
    logits = rms_norm(x, P["lnf.g"]) @ P["w_head"]
    return logits, F.cross_entropy(logits.view(-1, V), targets.view(-1))

def forward(P):
    if VARIANT == "llama":
        return forward_llama(P)
    x = P["wte"][tokens] + P["wpe"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    hd = C // H
    for l in range(L):
        h = F.layer_norm(x, (C,), P[f"h{l}.ln1.g"], None, 1e-5)
        q, k, v = (h @ P[f"h{l}.attn.wqkv"]).split(C, dim=2)
        q, k, v = (z.view(B, T, H, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ P[f"h{l}.attn.wo"]
        h2 = F.layer_norm(x, (C,), P[f"h{l}.ln2.g"], None, 1e-5)
        x = x + F.gelu(h2 @ P[f"h{l}.mlp.w_fc"]) @ P[f"h{l}.mlp.w_proj"]
    x = F.layer_norm(x, (C,), P["lnf.g"], None, 1e-5)
    logits = x @ P["wte"].T
    return logits, F.cross_entropy(logits.view(-1, V), targets.view(-1))

tensors = {"tokens": tokens.int(), "targets": targets.int()}
for name, p in P.items():
    tensors[name] = p.detach().clone()
logits, loss = forward(P)
loss.backward()
tensors["logits"] = logits.detach()
for name, p in P.items():
    tensors["grad." + name] = p.grad.detach().clone()

# 10 AdamW steps on the same batch: decay on matrices only, global-norm clipping.
params = list(P.values())
opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": WD},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=LR, betas=BETAS, eps=EPS)
losses = []
for _ in range(STEPS):
    opt.zero_grad(set_to_none=True)
    _, l = forward(P)
    losses.append(l.item())
    l.backward()
    torch.nn.utils.clip_grad_norm_(params, CLIP)
    opt.step()

golden = {"magic": "tinylm-golden", "version": 1, "torch": torch.__version__,
          "config": {"model": "tinylm", "vocab": V, "context": T, "layers": L, "heads": H, "channels": C, "bias": False,
                     **({"arch": "llama", "kv_heads": KV, "ffn": FFN, "rope_theta": THETA} if VARIANT == "llama" else {})},
          "batch": B, "loss": loss.item(), "adamw": {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1], "eps": EPS,
          "weight_decay": WD, "clip_norm": CLIP, "steps": STEPS}, "losses": losses}

# The Volta checkpoint container: sorted keys, data 64-byte aligned, FNV-1a checksum.
data, header = b"", {}
for name in sorted(tensors):
    t = tensors[name].contiguous()
    raw = t.numpy().tobytes()
    header[name] = {"dtype": {torch.float32: "F32", torch.int32: "I32"}[t.dtype], "shape": list(t.shape),
                    "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = 0xcbf29ce484222325
for byte in data:
    h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
header["__metadata__"] = {"checksum": "fnv1a64:%016x" % h, "format": "volta.checkpoint", "format_version": "1",
                          "golden": json.dumps(golden, sort_keys=True)}
text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
text += b" " * ((-(8 + len(text))) % 64)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                   "tinylm_golden.safetensors" if VARIANT == "gpt" else "tinylm_llama_golden.safetensors")
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
print(f"wrote {out}: loss {loss.item():.6f}, 10-step losses {losses[0]:.4f} -> {losses[-1]:.4f}, {len(data)} data bytes")
