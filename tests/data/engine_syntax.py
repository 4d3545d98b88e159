# Every statement and expression form Python 3.10/3.11 has, with V2 sites in
# each, so the Engine's own traversal is checked against libcst's transformer
# everywhere (tests/test_apply_speed_engine.py). Not a model: never run.
from __future__ import annotations

import os, sys as system  # noqa
from max.dtype import DType
from max.graph import DeviceRef, TensorValue, ops
from max.nn import Linear, Module, RMSNorm


@decorator(Linear(4, 4, DType.float32, DeviceRef.CPU()))
class Block(Module, metaclass=Meta):
    """Doc."""

    norm: RMSNorm = RMSNorm(4, DType.float32, 1e-6)
    sizes: list[int]

    def __init__(self, dim: int, dtype: DType = DType.float32, *args: int, device: DeviceRef, **kw: int) -> None:
        super().__init__()
        self.proj = Linear(dim, dim, dtype, device, has_bias=True)
        self.fns = [lambda x, *r, k=Linear(dim, dim, dtype, device), **o: k(x) for _ in range(2)]
        global COUNT
        COUNT = (COUNT := 1) + 1

    def __call__(self, x: TensorValue) -> TensorValue:
        if x is None:
            pass
        elif (y := ops.reshape(x, [1, -1])) is not None:
            x = y
        else:
            x = ops.max(x, axis=None)
        while x is None:
            break
        else:
            pass
        for i, *rest in enumerate([x]):
            assert i >= 0, f"{ops.min(x, axis=0)!r:>{i}} {x=}"
            continue
        try:
            del rest
        except (ValueError, TypeError) as exc:
            raise RuntimeError(ops.cast(x, DType.float32)) from exc
        else:
            x = -x + +x - ~x * x / x // x % x ** x @ x << x >> x & x | x ^ x
        finally:
            x = x
        with open("a") as a, open("b"): x = ops.transpose(x, 0, 1)
        match x:
            case [a, *others] if a:
                x = ops.reshape(x, [-1])
            case {"k": value, **more}:
                pass
            case Point(x=0, y=_) | (1 | 2) as pt:
                pass
            case None | True | -1 | 1 + 2j | "s" "t":
                pass
            case str() | bytes():
                pass
            case _:
                pass
        x += 1; x -= 1; x *= 2; x @= x; x //= 2; x **= 2; x >>= 1; x <<= 1; x &= 1; x |= 1; x ^= 1; x /= 1; x %= 1
        values = {k: ops.cast(v, DType.int32) for k, v in {}.items()} | {**{}, "b": 1}
        shapes = {i for i in [1, 2]}, [*[], 1], (*(), 2), {1, 2}
        gen = (ops.max(i, axis=None) async for i in self.agen()) if False else None
        sl = x[1:2:3, ..., None] if not x and x or x else x
        cmp = x < x <= x > x >= x == x != x is x is not x in x not in x
        nums = 1.5e3 + 0x1F + 0o7 + 0b1 + 1_000 + 1j, rb"\d", "a" "b"
        print(*[x], **{}, sep="")
        return self.proj(x)


async def agen():
    async with ctx() as c, other():
        await c
    async for item in agen():
        yield item
    nonlocal_ = (yield)
    return


def outer():
    v = 1

    def inner():
        nonlocal v
        yield from range(v)

    return inner
