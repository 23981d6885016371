"""A stand-in for the few torch calls compare_transformers.py makes, with torch's semantics for
exactly those calls (and an error for anything else), over plain Python lists. Only for
compare_transformers_test.py, which puts scripts/gpu/fake_hf first on PYTHONPATH: never on the
path of a real run (compare_transformers.py records `torch_fake` in its report)."""

import contextlib
import math

__version__ = "0.0-fake"
__fake__ = True


class dtype:  # noqa: N801 (torch's name)
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


bfloat16 = dtype("bfloat16")
float32 = dtype("float32")
float64 = dtype("float64")
int64 = dtype("int64")


class _Flags:
    allow_tf32 = True


class backends:  # noqa: N801
    class cuda:  # noqa: N801
        matmul = _Flags()

    cudnn = _Flags()


class version:  # noqa: N801
    cuda = "fake"


class cuda:  # noqa: N801
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_device_name(index=0):
        return "fake GPU (pure Python reference forward)"

    @staticmethod
    def empty_cache():
        pass


def inference_mode():
    return contextlib.nullcontext()


class Tensor:
    """A 0-, 1- or 2-D tensor of Python numbers (3-D only as a model's [1, T, H] output)."""

    def __init__(self, data, transposed_of=None):
        self.data = data
        self.transposed_of = transposed_of  # a 2-D tensor this is the .t() of (lazy)

    @property
    def shape(self):
        if self.transposed_of is not None:
            rows, cols = self.transposed_of.shape
            return (cols, rows)
        dims, d = [], self.data
        while isinstance(d, list):
            dims.append(len(d))
            d = d[0] if d else None
        return tuple(dims)

    def float(self):
        return self

    def double(self):
        return self

    def t(self):
        if len(self.shape) != 2 or self.transposed_of is not None:
            raise NotImplementedError("fake torch: t() of a 2-D tensor only")
        return Tensor(None, transposed_of=self)

    def tolist(self):
        return self.data

    def __int__(self):
        if isinstance(self.data, list):
            raise TypeError("only a one-element tensor converts to int")
        return int(self.data)

    def __add__(self, other):
        raise NotImplementedError("fake torch: no addition (no LM head bias expected)")

    def __matmul__(self, other):
        # [R, H] @ W.t() with W [V, H]: out[r][v] = dot(row r, W row v).
        if other.transposed_of is None or len(self.shape) != 2:
            raise NotImplementedError("fake torch: only hidden @ weight.t()")
        weight = other.transposed_of.data
        return Tensor([[sum(map(float.__mul__, w, row)) for w in weight] for row in self.data])

    def __getitem__(self, index):
        if isinstance(index, int):
            return Tensor(self.data[index])
        if isinstance(index, tuple) and len(index) == 2:
            first, second = index
            sub = self.data[first]
            if isinstance(second, slice):
                return Tensor(sub[second])
            if isinstance(second, list):
                return Tensor([sub[i] for i in second])
        raise NotImplementedError(f"fake torch: index {index!r}")


def tensor(data, device=None):
    return Tensor(data)


def _rows(t, dim):
    if dim != -1:
        raise NotImplementedError("fake torch: dim=-1 only")
    shape = t.shape
    if len(shape) == 1:
        return [t.data], True
    if len(shape) == 2:
        return t.data, False
    raise NotImplementedError("fake torch: 1-D or 2-D only")


def log_softmax(t, dim):
    rows, single = _rows(t, dim)
    out = []
    for row in rows:
        top = max(row)
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        out.append([v - lse for v in row])
    return Tensor(out[0] if single else out)


def topk(t, k, dim=-1):
    rows, single = _rows(t, dim)
    values, indices = [], []
    for row in rows:
        order = sorted(range(len(row)), key=lambda i: -row[i])[:k]
        indices.append(order)
        values.append([row[i] for i in order])
    if single:
        return Tensor(values[0]), Tensor(indices[0])
    return Tensor(values), Tensor(indices)


def argmax(t):
    rows, single = _rows(t, -1)
    if not single:
        raise NotImplementedError("fake torch: argmax of a 1-D tensor only")
    row = rows[0]
    return Tensor(max(range(len(row)), key=lambda i: row[i]))
