"""Issue 8, session 32: the default target's matmul shapes, oneDNN-packed (the lean runner's path)
against inductor's CPP GEMM template (torch.compile, frozen weights, max-autotune), per row count.

Each shape runs as 30 distinct weights (3 for the lm_head) so they are read from memory as in a
decode step; fastest of 10. Usage: python docs/results/session32/linear_shapes.py
"""

import time

import torch
import torch._inductor.config as inductor

from draftsmith.engine.packing import pack_weight, packed_linear

inductor.freezing = True
inductor.max_autotune = True
inductor.max_autotune_gemm_backends = "CPP"
SHAPES = {
    "qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536), "lm_head": (49152, 576)
}


class Linears(torch.nn.Module):
    def __init__(self, n: int, out: int, inp: int) -> None:
        super().__init__()
        self.ls = torch.nn.ModuleList([torch.nn.Linear(inp, out, bias=False) for _ in range(n)])

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [lin(x) for lin in self.ls]


def fastest(f, reps: int = 10) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main() -> None:
    torch.manual_seed(0)
    print("| shape | rows | oneDNN packed ms | inductor CPP GEMM ms | compile s |\n|---|---|---|---|---|")
    for name, (out, inp) in SHAPES.items():
        n = 3 if name == "lm_head" else 30
        m = Linears(n, out, inp).eval()
        packed = [pack_weight(lin.weight.detach()) for lin in m.ls]
        for rows in (1, 2, 4, 8):
            x = torch.randn(rows, inp)
            with torch.no_grad():
                compiled = torch.compile(m, dynamic=False)
                t0 = time.time()
                compiled(x)
                spent = time.time() - t0
                a = fastest(lambda: [packed_linear(x, p) for p in packed]) / n * 1e3  # noqa: B023
                b = fastest(lambda: compiled(x)) / n * 1e3  # noqa: B023
            print(f"| {name} | {rows} | {a:.3f} | {b:.3f} | {spent:.0f} |", flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
