"""A small reader and writer of the safetensors format.

memopt stores parameters, optimizer state and batches as safetensors files:
an 8-byte little-endian header length ``N``, ``N`` bytes of JSON describing
each tensor (``{"name": {"dtype": "F32", "shape": [...], "data_offsets":
[begin, end]}}``, offsets relative to the end of the header), padded with
spaces to a multiple of 8, then the raw little-endian data. Only numpy is
needed; torch tensors are accepted by :func:`save` and converted.
"""

import json
import os
import struct
import tempfile

import numpy as np

__all__ = ["save", "load", "read_metadata"]

# safetensors dtype name <-> little-endian numpy dtype. BF16 has no numpy
# type and is refused.
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def _as_numpy(value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def save(tensors, path, metadata=None):
    """Write ``tensors`` (a mapping from name to array or torch tensor) to
    ``path`` in the safetensors format, in the mapping's order.

    ``metadata``, if given, is a mapping of strings stored under
    ``__metadata__``. The file is written to a temporary file in the same
    directory and renamed, so ``path`` is never left half-written.
    """
    header = {}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        if name == "__metadata__":
            raise ValueError("'__metadata__' is reserved and cannot name a "
                             "tensor")
        array = _as_numpy(value)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" \
            else array.dtype
        if dtype not in _NAMES:
            raise ValueError("tensor '%s' has dtype %s, which safetensors "
                             "cannot store here" % (name, array.dtype))
        data = np.ascontiguousarray(array, dtype=dtype).tobytes()
        header[name] = {"dtype": _NAMES[dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}

    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    payload = [struct.pack("<Q", len(text)), text] + chunks
    write_atomically(path, payload)


def write_atomically(path, chunks):
    """Write the byte strings ``chunks`` to ``path`` through a temporary file
    in the same directory and an atomic rename. The file gets the
    permissions a plain ``open`` would give it (0666 less the umask), not
    the temporary file's private 0600."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_metadata(path):
    """The ``__metadata__`` mapping of the safetensors file ``path`` (empty
    when it has none), reading only its header."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError("%s: too short for a safetensors header" % path)
        (length,) = struct.unpack("<Q", prefix)
        text = f.read(length)
    if len(text) < length:
        raise ValueError("%s: header length %d exceeds the file size"
                         % (path, length))
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: malformed JSON header: %s" % (path, e))
    metadata = header.get("__metadata__", {}) if isinstance(header, dict) \
        else {}
    return metadata if isinstance(metadata, dict) else {}


def load(path):
    """Read a safetensors file and return ``{name: numpy array}`` in the
    file's order. Raises ``ValueError`` naming the problem if the file is not
    a well-formed safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: too short for a safetensors header" % path)
    (length,) = struct.unpack("<Q", blob[:8])
    if 8 + length > len(blob):
        raise ValueError("%s: header length %d exceeds the file size %d"
                         % (path, length, len(blob)))
    try:
        header = json.loads(blob[8:8 + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: malformed JSON header: %s" % (path, e))
    if not isinstance(header, dict):
        raise ValueError("%s: the header is not a JSON object" % path)

    data = memoryview(blob)[8 + length:]
    result = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("%s: tensor '%s' has a malformed entry %r"
                             % (path, name, info))
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or \
                end - begin != count * dtype.itemsize:
            raise ValueError("%s: tensor '%s' has data offsets [%d, %d] that "
                             "do not fit its shape %s and dtype %s"
                             % (path, name, begin, end, list(shape),
                                info["dtype"]))
        result[name] = np.frombuffer(data[begin:end], dtype=dtype) \
            .reshape(shape).copy()
    return result
