"""PyTorch models bundled with memopt, with example batches.

Each model's forward() returns the training loss, as memopt.export expects.
They are the PyTorch twins of the hand-written examples/*.mlir, used by the
main job (scripts/demo.sh) and by the tests that compare memopt's training
with torch.optim's.

Run with Debian's /usr/bin/python3 (torch 1.13).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """A 2-layer perceptron classifying 64 features into 10 classes."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)

    @staticmethod
    def example_batch(generator):
        x = torch.randn(32, 64, generator=generator)
        y = torch.randint(0, 10, (32,), generator=generator)
        return {"x": x, "y": y}


class CausalSelfAttention(nn.Module):
    def __init__(self, embed, heads, block, dropout, device=None):
        super().__init__()
        self.heads = heads
        # No bias on the key projection: its gradient is exactly zero (softmax
        # is shift-invariant), so it would only train on rounding noise.
        self.c_attn = nn.Linear(embed, 3 * embed, bias=False, device=device)
        self.c_proj = nn.Linear(embed, embed, device=device)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer(
            "bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size(0), x.size(1), x.size(2)
        H = self.heads
        qkv = self.c_attn(x)
        q = qkv[:, :, :C].view(B, T, H, C // H).transpose(1, 2)
        k = qkv[:, :, C:2 * C].view(B, T, H, C // H).transpose(1, 2)
        v = qkv[:, :, 2 * C:].view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, embed, heads, block, dropout, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed, device=device)
        self.attn = CausalSelfAttention(embed, heads, block, dropout, device)
        self.ln_2 = nn.LayerNorm(embed, device=device)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(embed, 4 * embed, device=device),
            c_proj=nn.Linear(4 * embed, embed, device=device),
            dropout=nn.Dropout(dropout)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.dropout(m.c_proj(F.gelu(m.c_fc(self.ln_2(x)),
                                             approximate="tanh")))


class GPT(nn.Module):
    """A GPT-style decoder (nanoGPT layout): token and position embeddings,
    causal multi-head attention, GELU MLP, residuals, an LM head tied to the
    token embedding, cross-entropy with ignore_index=-100.

    With device="meta" the parameters have shapes but no data (for
    accounting, see gpt2_small); the buffers stay on the CPU."""

    def __init__(self, vocab=128, block=16, embed=64, heads=4, layers=2,
                 dropout=0.0, device=None):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, embed, device=device),
            wpe=nn.Embedding(block, embed, device=device),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(embed, heads, block, dropout, device)
                             for _ in range(layers)]),
            ln_f=nn.LayerNorm(embed, device=device)))
        self.lm_head = nn.Linear(embed, vocab, bias=False, device=device)
        self.lm_head.weight = self.transformer.wte.weight
        self.vocab, self.block = vocab, block
        # Positions as a buffer: torch.fx cannot trace arange(t) of a traced t.
        self.register_buffer("pos", torch.arange(block), persistent=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # GPT-2's initialisation: small normal weights, zero biases.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = self.pos[:t]
        tr = self.transformer
        x = tr.drop(tr.wte(idx) + tr.wpe(pos))
        for block in tr.h:
            x = block(x)
        logits = self.lm_head(tr.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1), ignore_index=-100)

    def example_batch(self, generator, batch=4):
        idx = torch.randint(0, self.vocab, (batch, self.block),
                            generator=generator)
        targets = torch.randint(0, self.vocab, (batch, self.block),
                                generator=generator)
        # Padded sequences: the tail of each row is ignored, unevenly.
        for row in range(batch):
            targets[row, self.block - 2 * row:] = -100
        return {"idx": idx, "targets": targets}


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


class CNN(nn.Module):
    """A small ResNet-style CNN: conv + batch norm + relu, a residual basic
    block, max pooling, a second conv stage, average pooling, a linear
    classifier."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.avgpool = nn.AvgPool2d(8)
        self.fc = nn.Linear(32, 10)

    def forward(self, x, y):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.layer1(x))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.avgpool(x).flatten(1)
        return F.cross_entropy(self.fc(x), y)

    @staticmethod
    def example_batch(generator):
        x = torch.randn(8, 3, 16, 16, generator=generator)
        y = torch.randint(0, 10, (8,), generator=generator)
        return {"x": x, "y": y}


class RMSNorm(nn.Module):
    """LLaMA's RMSNorm, written out: torch 1.13 has no fused one, and memopt
    exports the composition (pow, mean, add, rsqrt, mul)."""

    def __init__(self, dim, eps=1e-5, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def rotate_half(x):
    """The rotation RoPE pairs with cos and sin: (x1, x2) -> (-x2, x1) on the
    two halves of the last dimension (Hugging Face's LLaMA)."""
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Causal multi-head attention without biases, with rotary position
    embeddings, written as Hugging Face's LLaMA writes it: cos and sin
    tables computed once as buffers (on the CPU even when the parameters
    are on the meta device), the scores' softmax in float32 through its
    dtype argument and cast back to the queries' dtype."""

    def __init__(self, dim, heads, block, device=None, base=10000.0,
                 kv_heads=None):
        super().__init__()
        self.heads = heads
        # Grouped-query attention (Llama 2 70B): fewer key and value heads,
        # each shared by heads // kv_heads query heads.
        self.kv_heads = kv_heads or heads
        kv_dim = dim // heads * self.kv_heads
        self.wq = nn.Linear(dim, dim, bias=False, device=device)
        self.wk = nn.Linear(dim, kv_dim, bias=False, device=device)
        self.wv = nn.Linear(dim, kv_dim, bias=False, device=device)
        self.wo = nn.Linear(dim, dim, bias=False, device=device)
        self.register_buffer(
            "mask", torch.tril(torch.ones(block, block)).view(
                1, 1, block, block), persistent=False)
        head = dim // heads
        inv_freq = 1.0 / base ** (torch.arange(0, head, 2).float() / head)
        freqs = torch.outer(torch.arange(block).float(), inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        B, T, C = x.size(0), x.size(1), x.size(2)
        H = self.heads
        KV, D = self.kv_heads, C // H
        q = self.wq(x).view(B, T, H, D).transpose(1, 2)
        k = self.wk(x).view(B, T, KV, D).transpose(1, 2)
        v = self.wv(x).view(B, T, KV, D).transpose(1, 2)
        if KV != H:
            # Hugging Face's repeat_kv.
            k = k[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
            v = v[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        y = att @ v
        return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, hidden, block, device=None, kv_heads=None):
        super().__init__()
        self.attention_norm = RMSNorm(dim, device=device)
        self.attention = LlamaAttention(dim, heads, block, device,
                                        kv_heads=kv_heads)
        self.ffn_norm = RMSNorm(dim, device=device)
        self.feed_forward = nn.ModuleDict(dict(
            w1=nn.Linear(dim, hidden, bias=False, device=device),
            w2=nn.Linear(hidden, dim, bias=False, device=device),
            w3=nn.Linear(dim, hidden, bias=False, device=device)))

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        f = self.feed_forward
        h = self.ffn_norm(x)
        # SwiGLU.
        return x + f.w2(F.silu(f.w1(h)) * f.w3(h))


class Llama(nn.Module):
    """A LLaMA-style decoder (Meta's parameter names): token embedding,
    pre-norm blocks with RMSNorm, causal attention and a SwiGLU MLP, a final
    RMSNorm and an untied output projection; cross-entropy on the next
    tokens. The defaults are a tiny model; llama_7b() is LLaMA-7B's shape."""

    def __init__(self, vocab=128, block=16, dim=64, heads=4, hidden=172,
                 layers=2, device=None, kv_heads=None):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim, device=device)
        self.layers = nn.ModuleList([
            LlamaBlock(dim, heads, hidden, block, device, kv_heads)
            for _ in range(layers)])
        self.norm = RMSNorm(dim, device=device)
        self.output = nn.Linear(dim, vocab, bias=False, device=device)
        self.vocab, self.block = vocab, block

    def forward(self, idx, targets):
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1))

    def example_batch(self, generator, batch=2):
        idx = torch.randint(0, self.vocab, (batch, self.block),
                            generator=generator)
        targets = torch.randint(0, self.vocab, (batch, self.block),
                                generator=generator)
        return {"idx": idx, "targets": targets}


def gpt2_small(device="meta"):
    """GPT-2 small (124M): 12 layers, 768 wide, 12 heads, vocab 50257,
    context 1024, tied embeddings."""
    return GPT(vocab=50257, block=1024, embed=768, heads=12, layers=12,
               dropout=0.0, device=device)


def llama_7b(device="meta"):
    """LLaMA-7B's shape: 32 layers, 4096 wide, 32 heads, SwiGLU MLP of
    11008, vocab 32000, context 2048 (6,738,415,616 parameters)."""
    return Llama(vocab=32000, block=2048, dim=4096, heads=32, hidden=11008,
                 layers=32, device=device)


def llama2_70b(device="meta"):
    """Llama 2 70B's shape: 80 layers, 8192 wide, 64 query heads sharing 8
    key and value heads, SwiGLU MLP of 28672, vocab 32000, context 4096
    (68,976,648,192 parameters)."""
    return Llama(vocab=32000, block=4096, dim=8192, heads=64, hidden=28672,
                 layers=80, device=device, kv_heads=8)


# The large configurations, on the meta device, and their example batch
# shapes (batch, sequence): for accounting, not for training on the host.
# gpt2-small and llama-7b are bundled in examples/; llama2-70b is exported
# by the benchmarks that use it (bench/offload).
LARGE_MODELS = {"gpt2-small": (gpt2_small, (8, 1024)),
                "llama-7b": (llama_7b, (1, 2048)),
                "llama2-70b": (llama2_70b, (1, 4096))}

MODELS = {"mlp": MLP, "gpt": GPT, "cnn": CNN, "llama": Llama}


def build(name, seed=0):
    """Returns (model, batch dict) for `name`, deterministically."""
    torch.manual_seed(seed)
    model = MODELS[name]()
    generator = torch.Generator().manual_seed(seed + 1)
    return model, model.example_batch(generator)
