"""Models written as torchvision writes them: shapes unpacked and used in
arithmetic and in view arguments, chunk/split/unbind, lists given to
torch.cat and torch.stack, submodules that return tuples, flatten, a mask
filled in from `x.new_zeros(T, T)` in a loop over the length.
torch.fx's symbolic tracing in torch 1.13 traces none of them; memopt's
tracer (docs/Exporter.md, "Tracing") does. test/python/trace-shapes.py
checks their IR, test/Integration/trace-vs-pytorch.py trains them against
PyTorch."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CLASSES = 2, 10


class ChannelShuffle(nn.Module):
    """ShuffleNet's: `x.size()` unpacked into view arguments."""

    def forward(self, x):
        n, c, h, w = x.size()
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2)
        return x.reshape(n, -1, h, w)


class TwoWay(nn.Module):
    """Splits the channels in two and returns both branches: a tuple."""

    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.left = nn.Conv2d(half, half, 1)
        self.right = nn.Conv2d(half, half, 3, padding=1)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return self.left(a), F.relu(self.right(b))


class ConvNet(nn.Module):
    """x [BATCH, 3, 6, 6] -> 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.shuffle = ChannelShuffle()
        self.branches = TwoWay(4)
        self.fc = nn.Linear(36 + 18, CLASSES)

    def forward(self, x, y):
        x = self.shuffle(self.stem(x))
        left, right = self.branches(x)
        x = torch.cat([left, right], dim=1)
        first, rest = x.split([1, 3], dim=1)
        rows = rest.unbind(2)
        pooled = torch.stack([r.mean(-1) for r in rows], dim=-1) / len(rows)
        features = torch.cat((torch.flatten(first, 1), pooled.flatten(1)), 1)
        return F.cross_entropy(self.fc(features), y)

    @staticmethod
    def example_batch(generator):
        return {"x": torch.randn(BATCH, 3, 6, 6, generator=generator),
                "y": torch.randint(0, CLASSES, (BATCH,), generator=generator)}


class Attention(nn.Module):
    """Self-attention with the shapes read from its input, each token
    attending to itself and the tokens after it (so that the first, the
    class token, sees all of them)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * k.size(-1) ** -0.5
        earlier = x.new_zeros(T, T, dtype=torch.bool)
        for i in range(1, T):
            earlier[i, :i] = True
        p = scores.masked_fill(earlier, float("-inf")).softmax(-1)
        return self.proj((p @ v).transpose(1, 2).reshape(B, T, C))


class PatchTransformer(nn.Module):
    """ViT's shape: patches from `n, c, h, w = x.shape`, a class token
    expanded to the batch, positions sliced to the length, attention, the
    class token's output."""

    PATCH, WIDTH, HEADS = 2, 8, 2

    def __init__(self):
        super().__init__()
        p = self.PATCH
        self.embed = nn.Linear(3 * p * p, self.WIDTH)
        self.cls = nn.Parameter(torch.randn(1, 1, self.WIDTH) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, 32, self.WIDTH) * 0.5)
        self.norm = nn.LayerNorm(self.WIDTH)
        self.attn = Attention(self.WIDTH, self.HEADS)
        self.head = nn.Linear(self.WIDTH, CLASSES)

    def forward(self, x, y):
        n, c, h, w = x.shape
        p = self.PATCH
        x = x.reshape(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        x = self.embed(x.reshape(n, (h // p) * (w // p), c * p * p))
        x = torch.cat([self.cls.expand(n, -1, -1), x], dim=1)
        x = x + self.pos[:, :x.shape[1]]
        x = x + self.attn(self.norm(x))
        return F.cross_entropy(self.head(x[:, 0]), y)

    @staticmethod
    def example_batch(generator):
        return {"x": torch.randn(BATCH, 3, 4, 6, generator=generator),
                "y": torch.randint(0, CLASSES, (BATCH,), generator=generator)}
