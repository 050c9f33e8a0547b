"""The state torchao's low-bit AdamW, bitsandbytes' Lion and torch's Muon keep, measured on small CPU tensors with the
libraries' own optimizers (core.training.optimizer: AO_LOW_BIT, LION_FAMILY, _ao_state_terms, _lion_state_terms).

One step of each optimizer over bf16 parameters shaped as a tiny Llama's (an embedding, attention and MLP
projections, a norm) plus a 100 x 50 matrix of 5,000 elements (over torchao's 4,096-element threshold, but no
multiple of its blocks), gradients random. The bytes of every state tensor are summed (a torchao state subclass by
its ``codes``, ``scale`` and ``qmap`` storages; each storage counted once: bitsandbytes shares one qmap per
optimizer), the step counters left out, and set beside the planner's rule per tensor:

- torchao AdamW8bit / AdamW4bit / AdamWFp8 (pytorch/ao 36027d82 torchao/optim/adam.py ``_new_buffer``): a tensor of
  4,096 elements or more that its block (256 / 128 / 256) divides keeps two quantised moments, codes (1 / 0.5 / 1 B
  an element) plus one float32 scale a block and a float32 qmap (256 / 16 / no entries); any other tensor two
  ``zeros_like(p)`` moments in its own dtype (bf16 here);
- bitsandbytes Lion (optim_bits 32): one float32 ``state1``; Lion8bit: uint8 ``state1`` with a float32 absmax per
  started block of 256, float32 under 4,096 elements (bitsandbytes 95f9af30 optim/optimizer.py
  Optimizer1State.init_state); on the CPU the paged variants fall back to ordinary tensors (get_state_buffer);
- torch.optim.Muon (torch 2.13.0 torch/optim/_muon.py): one ``momentum_buffer`` (zeros_like the gradient) for each
  2-D parameter; it refuses any other (``Muon only supports 2D parameters``).

Measured (the output below the command): every tensor's state equals the rule to the byte, but for Lion8bit's
embedding, which carries the optimizer's one shared qmap (256 float32, 1,024 B; the planner leaves it out).

    /tmp/torchenv/bin/python tools/measure/optimizer_state_check.py   # torch 2.13.0 CPU, torchao 0.18.0,
                                                                       # bitsandbytes 0.50.2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

SHAPES = {
    "embed": (1000, 256),
    "q_proj": (256, 256),
    "k_proj": (64, 256),
    "gate_proj": (688, 256),
    "norm": (256,),
    "odd": (100, 50),
}
AO = {"AdamW8bit": (1.0, 256, 256), "AdamW4bit": (0.5, 128, 16), "AdamWFp8": (1.0, 256, 0)}


def _params() -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    out = []
    for shape in SHAPES.values():
        p = torch.nn.Parameter(torch.randn(shape, dtype=torch.bfloat16))
        p.grad = torch.randn_like(p)
        out.append(p)
    return out


def _storages(value: Any) -> Iterable[torch.UntypedStorage]:
    attrs = getattr(value, "tensor_attrs", None)
    if attrs:  # a torchao state subclass: its inner tensors
        for name in attrs:
            yield getattr(value, name).untyped_storage()
    elif isinstance(value, torch.Tensor):
        yield value.untyped_storage()


def state_bytes(optimizer: torch.optim.Optimizer) -> dict[int, int]:
    """Bytes of state per parameter index, each storage once, step counters left out."""
    seen: set[int] = set()
    index = {id(p): i for i, p in enumerate(optimizer.param_groups[0]["params"])}
    out: dict[int, int] = {}
    for p, state in optimizer.state.items():
        total = 0
        for name, value in state.items():
            if name == "step":
                continue
            for storage in _storages(value):
                if storage.data_ptr() not in seen:
                    seen.add(storage.data_ptr())
                    total += storage.nbytes()
        out[index[id(p)]] = total
    return out


def ao_expected(kind: str, n: int) -> float:
    code, block, qmap = AO[kind]
    quantised = n >= 4096 and n % block == 0
    return 2 * (n * code + n / block * 4 + qmap * 4) if quantised else 2 * n * 2


def lion_expected(bits: int, n: int) -> float:
    if bits == 32 or n < 4096:
        return n * 4.0
    return n + math.ceil(n / 256) * 4.0


def _report(
    name: str, make: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer], rule: Callable[..., float]
) -> None:
    params = _params()
    optimizer = make(params)
    optimizer.step()
    measured = state_bytes(optimizer)
    print(f"{name}:")
    for i, (tensor, shape) in enumerate(SHAPES.items()):
        n = math.prod(shape)
        print(f"  {tensor:10} {n:>8,} elements  measured {measured.get(i, 0):>9,} B  rule {rule(n):>11,.0f} B")
    print(f"  total measured {sum(measured.values()):,} B")


def main() -> None:
    import bitsandbytes as bnb
    import torchao
    from torchao.optim import AdamW4bit, AdamW8bit, AdamWFp8

    print(f"torch {torch.__version__}, torchao {torchao.__version__}, bitsandbytes {bnb.__version__}")
    for kind, cls in (("AdamW8bit", AdamW8bit), ("AdamW4bit", AdamW4bit), ("AdamWFp8", AdamWFp8)):
        _report(f"torchao {kind}", cls, lambda n, k=kind: ao_expected(k, n))
    _report("bitsandbytes Lion (32-bit)", lambda ps: bnb.optim.Lion(ps, optim_bits=32), lambda n: lion_expected(32, n))
    _report("bitsandbytes Lion8bit", lambda ps: bnb.optim.Lion8bit(ps), lambda n: lion_expected(8, n))
    two_d = [p for p in _params() if p.ndim == 2]
    muon = torch.optim.Muon(two_d)
    muon.step()
    print(f"torch.optim.Muon over the 2-D tensors: {sum(state_bytes(muon).values()):,} B of momentum")
    try:
        torch.optim.Muon(_params())
    except ValueError as error:
        print(f"torch.optim.Muon over every tensor: refused ({error})")


if __name__ == "__main__":
    main()
