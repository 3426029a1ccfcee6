"""GPU peers for scripts/gpu_check.sh: cuBLAS SGEMM through PyTorch on the suite of
`volta bench matmul` (fp32, TF32 off), timed with CUDA events, one JSON object per line.

Usage: python3 bench/gpu_peer.py matmul [--runs 5]
"""
import argparse
import json

import torch

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


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["matmul"])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    bench_matmul(args.runs)
