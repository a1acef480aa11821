"""PyTorch eager baseline of bench/gpu: the same GPT, the same technique.

    torch_gpt.py --precision fp32|bf16 --remat none|blocks [--steps N]
                 [--batch B --seq T --embed C --heads H --layers L
                  --vocab V --dropout P]

Prints one line `torch step_ms=<mean> peak_bytes=<max allocated>` or
`torch n/a <reason>` when torch or a CUDA device is missing. bf16 is
torch.autocast (bf16 matmuls, f32 master weights); remat=blocks wraps every
transformer block in torch.utils.checkpoint. TF32 is off, as in memopt.
AdamW(lr 1e-3, weight decay 0.01), as memopt-compile's default.
"""

import argparse
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--remat", default="none")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--embed", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--dropout", type=float, default=0.1)
    a = parser.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.utils.checkpoint
    except Exception as error:  # noqa: BLE001
        print(f"torch n/a (no torch: {error})")
        return
    if not torch.cuda.is_available():
        print("torch n/a (torch has no CUDA device)")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    T, C, H = a.seq, a.embed, a.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.m_proj = nn.Linear(4 * C, C)
            self.drop = nn.Dropout(a.dropout)
            self.attn_drop = nn.Dropout(a.dropout)
            self.register_buffer("mask", torch.triu(
                torch.ones(T, T, dtype=torch.bool), diagonal=1))

        def forward(self, x):
            b = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(b, T, H, C // H).transpose(1, 2)
                       for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
            att = att.masked_fill(self.mask, float("-inf"))
            att = self.attn_drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).reshape(b, T, C)
            x = x + self.drop(self.c_proj(y))
            h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
            return x + self.drop(self.m_proj(h))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, C)
            self.wpe = nn.Embedding(T, C)
            self.drop = nn.Dropout(a.dropout)
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            pos = torch.arange(T, device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.blocks:
                if a.remat == "blocks":
                    x = torch.utils.checkpoint.checkpoint(
                        block, x, use_reentrant=False)
                else:
                    x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, a.vocab).float(),
                                   targets.view(-1))

    device = torch.device("cuda")
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                  weight_decay=0.01)
    idx = torch.randint(0, a.vocab, (a.batch, T), device=device)
    targets = torch.randint(0, a.vocab, (a.batch, T), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=a.precision == "bf16"):
            loss = model(idx, targets)
        loss.backward()
        optimizer.step()
        return loss

    try:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            step()
        stop.record()
        torch.cuda.synchronize()
    except RuntimeError as error:
        print(f"torch n/a ({str(error).splitlines()[0]})")
        return
    print(f"torch step_ms={start.elapsed_time(stop) / a.steps:.3f} "
          f"peak_bytes={torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    sys.exit(main())
