"""Ratio tables from the JSON lines bench/compare.sh leaves in LOGS (Markdown, like bench/README.md).

Usage: python3 bench/compare_report.py LOGS THREADS...
Reads LOGS/{volta,openblas,onednn}_matmul_tT.jsonl, {volta,torch}_train_tT.jsonl and
{volta,torch}_infer_tT.jsonl. Ratios above 1 mean Volta is faster.
"""
import json
import os
import sys


def rows(logs, name):
    """JSON objects of one log (lines that are not JSON objects are skipped)."""
    path = os.path.join(logs, name + ".jsonl")
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.startswith("{")]
    except OSError:
        sys.exit(f"compare_report.py: missing {path} (run bench/compare.sh)")


def one(logs, name, **match):
    """The single row of a log whose keys equal `match`."""
    found = [r for r in rows(logs, name) if all(r.get(k) == v for k, v in match.items())]
    if not found:
        sys.exit(f"compare_report.py: no row {match} in {name}.jsonl")
    return found[0]


def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "-"


def gemm_table(logs, threads):
    print("GEMM, fp32 GFLOP/s (median); ratio = Volta / peer, higher is better")
    print()
    print("| group | m | n | k | form | threads | Volta | OpenBLAS | oneDNN | Volta/OpenBLAS | Volta/oneDNN |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        peers = {}
        for peer in ("openblas", "onednn"):
            peers[peer] = {(r["m"], r["n"], r["k"], r.get("form", "nn")): r["gflops"] for r in rows(logs, f"{peer}_matmul_t{t}")}
        for v in rows(logs, f"volta_matmul_t{t}"):
            shape = (v["m"], v["n"], v["k"], v.get("form", "nn"))
            blas, dnnl = peers["openblas"].get(shape, 0.0), peers["onednn"].get(shape, 0.0)
            print(f"| {v['group']} | {v['m']} | {v['n']} | {v['k']} | {shape[3]} | {t} | {v['gflops']:.1f} | {blas:.1f} | "
                  f"{dnnl:.1f} | {ratio(v['gflops'], blas)} | {ratio(v['gflops'], dnnl)} |")
    print()


def train_table(logs, threads):
    print("TinyLM training step (shakespeare-char, batch 12 x 64), median ms; ratio = PyTorch ms / Volta ms")
    print()
    print("| threads | Volta ms | PyTorch ms | PyTorch/Volta |")
    print("|---|---|---|---|")
    for t in threads:
        v = one(logs, f"volta_train_t{t}", bench="train")["ms_per_step"]
        p = one(logs, f"torch_train_t{t}", bench="train")["ms_per_step"]
        print(f"| {t} | {v:.1f} | {p:.1f} | {ratio(p, v)} |")
    print()


def decode_table(logs, threads):
    print("TinyLM greedy decode, batch 1, 63 tokens, tokens/s; ratio = Volta / PyTorch")
    print()
    print("| threads | KV cache | Volta tok/s | PyTorch tok/s | Volta/PyTorch |")
    print("|---|---|---|---|---|")
    for t in threads:
        for kv in (True, False):
            v = one(logs, f"volta_infer_t{t}", batch=1, kv_cache=kv)["decode_tokens_per_s"]
            p = one(logs, f"torch_infer_t{t}", batch=1, kv_cache=kv)["decode_tokens_per_s"]
            print(f"| {t} | {'on' if kv else 'off'} | {v:,.0f} | {p:,.0f} | {ratio(v, p)} |")
    print()


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: compare_report.py LOGS THREADS...")
    logs, threads = sys.argv[1], [int(t) for t in sys.argv[2:]]
    gemm_table(logs, threads)
    train_table(logs, threads)
    decode_table(logs, threads)


if __name__ == "__main__":
    main()
