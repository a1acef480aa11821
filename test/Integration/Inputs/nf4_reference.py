"""NF4 with double quantization (Dettmers et al. 2023, QLoRA) written from
its definition in numpy, independently of memopt's runtime: the values a
frozen weight takes when memopt stores it in NF4 (docs/Quantization.md).
Used by the tests as the weights of their PyTorch reference."""

import numpy as np

# The 16 NF4 levels as QLoRA publishes them.
LEVELS = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
    0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0], dtype=np.float32)
BLOCK, GROUP = 64, 256


def dynamic_signed_code():
    """bitsandbytes' signed dynamic code (create_dynamic_map): in each of
    seven decades 10^-6 .. 10^0, the midpoints of 2^d equal steps of
    [0.1, 1] and their negatives, then 0 and 1; each computed exactly (in
    float64) and rounded once to float32."""
    values = [0.0, 1.0]
    for d in range(7):
        bounds = np.linspace(0.1, 1.0, 2 ** d + 1)
        means = 10.0 ** (d - 6) * (bounds[:-1] + bounds[1:]) / 2.0
        values += list(means) + list(-means)
    return np.array(sorted(values), dtype=np.float32)


def _nearest(table, x):
    """The index of the nearest entry of the ascending `table` to each x,
    the lower on a tie."""
    above = np.clip(np.searchsorted(table, x, side="right"), 1,
                    len(table) - 1)
    below = above - 1
    pick_above = (table[above] - x) < (x - table[below])
    return np.where(pick_above, above, below)


def dequantized(weight):
    """The float32 values NF4 stores for `weight` (any float array)."""
    flat = np.asarray(weight, dtype=np.float32).ravel()
    n = flat.size
    blocks = -(-n // BLOCK)
    padded = np.zeros(blocks * BLOCK, dtype=np.float32)
    padded[:n] = flat
    absmax = np.abs(padded.reshape(blocks, BLOCK)).max(axis=1)
    # Double quantization: the absmaxes less their mean, in groups of 256
    # with the dynamic code.
    offset = np.float32(absmax.astype(np.float64).mean())
    centered = (absmax - offset).astype(np.float32)
    code = dynamic_signed_code()
    restored = np.empty_like(absmax)
    for start in range(0, blocks, GROUP):
        part = centered[start:start + GROUP]
        scale = np.float32(np.abs(part).max())
        inverse = np.float32(1) / scale if scale > 0 else np.float32(0)
        codes = _nearest(code, (part * inverse).astype(np.float32))
        restored[start:start + GROUP] = (code[codes] * scale).astype(
            np.float32) + offset
    safe = np.where(absmax > 0, absmax, np.float32(1))
    normalized = np.where(np.repeat(absmax > 0, BLOCK),
                          padded / np.repeat(safe, BLOCK), np.float32(0))
    levels = _nearest(LEVELS, normalized.astype(np.float32))
    values = (LEVELS[levels] * np.repeat(restored, BLOCK)).astype(np.float32)
    return values[:n].reshape(np.shape(weight))
