"""Which tensors of bitsandbytes' paged optimizers are paged and which are ordinary device tensors
(core.training.optimizer: PAGED, paged_state_bytes, _state_terms, _eight_bit_state_terms, _lion_state_terms).

bitsandbytes' own ``init_state`` runs for PagedAdamW, PagedAdamW8bit, PagedLion and PagedLion8bit over parameters on
PyTorch's ``meta`` device: ``get_state_buffer`` returns early with ordinary tensors when ``p.device.type == "cpu"``
(so a CPU run never reaches the paged branch), while a meta parameter takes the same branch as a CUDA one
(``if not self.is_paged or p.numel() < 1e5: torch.zeros_like ... else: F.get_paged``). Only ``F.get_paged``
(``cudaMallocManaged`` through ``lib.cget_managed_ptr``) and ``F.fill`` are replaced, by recorders that return a meta
tensor marked ``is_paged``; every other tensor (absmax, qmap, the small tensors' state) is made by the library's
code as it stands. Measured, per tensor: each state entry, its dtype, its bytes and whether it is paged.

Read from bitsandbytes 95f9af309d4d5793847169c39288dcd3fcbdf564 (main, 2026-08-19), identical in the installed 0.50.2:
- bitsandbytes/optim/optimizer.py ``Optimizer8bit.get_state_buffer`` (lines 374-390): paged only when the optimizer
  is paged and ``p.numel() >= 1e5``; otherwise ``torch.zeros_like(p, dtype=dtype, device=p.device)``;
- ``Optimizer2State.init_state`` (lines 492-532): ``p.numel() < min_8bit_size`` (4096) gives float32 state1/state2
  through get_state_buffer; 8-bit gives uint8 state1/state2 through get_state_buffer, ``qmap1``/``qmap2`` the
  optimizer's shared ``name2qmap`` maps ``.to(p.device)`` and ``absmax1``/``absmax2`` ``torch.zeros((blocks,),
  dtype=torch.float32, device=p.device)``, blocks = ceil(n / 256): device tensors whatever ``is_paged``;
- ``Optimizer1State.init_state`` (lines 664-698): the same with state1, qmap1 and absmax1 only (Lion);
- bitsandbytes/functional.py ``get_paged`` (lines 91-99): ``cget_managed_ptr`` (cudaMallocManaged), ``is_paged``.

Measured (torch 2.13.0 CPU, bitsandbytes 0.50.2; the PagedAdamW8bit lines of the output below the command): the paged
tensors are exactly the state1/state2 of tensors of 1e5 elements or more (uint8 at 8 bits, float32 at 32); every
absmax and qmap, and the whole state of smaller tensors, is an ordinary device tensor. A tensor under min_8bit_size
(4,096 < 1e5) is never paged; with min_8bit_size raised over 1e5 its float32 state would be.

    /tmp/torchenv/bin/python tools/measure/paged_state_check.py

    big   131,072 el: state1 uint8 131,072 B PAGED, qmap1 float32 1,024 B device, state2 uint8 131,072 B PAGED,
                      qmap2 float32 1,024 B device, absmax1 float32 2,048 B device, absmax2 float32 2,048 B device
    mid    65,536 el: state1 uint8 65,536 B device, qmap1 float32 1,024 B device, state2 uint8 65,536 B device,
                      qmap2 float32 1,024 B device, absmax1 float32 1,024 B device, absmax2 float32 1,024 B device
    edge    4,096 el: state1 uint8 4,096 B device, qmap1 float32 1,024 B device, state2 uint8 4,096 B device,
                      qmap2 float32 1,024 B device, absmax1 float32 64 B device, absmax2 float32 64 B device
    norm    2,048 el: state1 float32 8,192 B device, state2 float32 8,192 B device
    paged 262,144 B; device (without the shared qmaps) 161,920 B; qmaps shared: True
"""

from __future__ import annotations

import warnings
from typing import Any

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch

# numel 131,072 (>= 1e5: paged), 65,536 (8-bit, not paged), 4,096 (8-bit), 2,048 (under min_8bit_size: float32)
SHAPES = {"big": (512, 256), "mid": (256, 256), "edge": (16, 256), "norm": (2048,)}
PAGED_NUMEL = 100_000  # bitsandbytes 95f9af30 optim/optimizer.py line 383: p.numel() < 1e5
CLASSES = ("PagedAdamW", "PagedAdamW8bit", "PagedLion", "PagedLion8bit")


def _fake_get_paged(*shape: int, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    out = torch.empty(shape, dtype=dtype, device="meta")
    out.is_paged = True  # type: ignore[attr-defined]
    return out


def _fill(*_args: Any, **_kwargs: Any) -> None:
    return None


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def measure(name: str) -> dict[str, dict[str, tuple[str, int, bool]]]:
    """Per parameter, per state entry: (dtype, bytes, paged)."""
    params = [torch.nn.Parameter(torch.empty(s, dtype=torch.bfloat16, device="meta")) for s in SHAPES.values()]
    opt = getattr(bnb.optim, name)(params, lr=1e-4)
    group = opt.param_groups[0]
    out: dict[str, dict[str, tuple[str, int, bool]]] = {}
    for pindex, (label, p) in enumerate(zip(SHAPES, params, strict=True)):
        opt.init_state(group, p, 0, pindex)
        out[label] = {
            k: (str(v.dtype).removeprefix("torch."), _nbytes(v), bool(getattr(v, "is_paged", False)))
            for k, v in opt.state[p].items()
            if isinstance(v, torch.Tensor)
        }
    return out


def _shared_qmaps(name: str) -> str:
    """Whether every 8-bit tensor's qmap1 is one and the same tensor (name2qmap, once per optimizer)."""
    params = [torch.nn.Parameter(torch.empty(s, dtype=torch.bfloat16, device="meta")) for s in SHAPES.values()]
    opt = getattr(bnb.optim, name)(params, lr=1e-4)
    for pindex, p in enumerate(params):
        opt.init_state(opt.param_groups[0], p, 0, pindex)
    qmaps = [opt.state[p]["qmap1"] for p in params if "qmap1" in opt.state[p]]
    return str(all(q is qmaps[0] for q in qmaps)) if qmaps else "none (32-bit)"


def main() -> None:
    F.get_paged, F.fill = _fake_get_paged, _fill
    warnings.simplefilter("ignore")
    print(f"bitsandbytes {bnb.__version__}, torch {torch.__version__}; shapes {SHAPES}")
    for name in CLASSES:
        paged = device = 0
        print(f"\n{name}")
        for label, entries in measure(name).items():
            numel = torch.Size(SHAPES[label]).numel()
            cells = ", ".join(f"{k} {d} {b:,} B {'PAGED' if pg else 'device'}" for k, (d, b, pg) in entries.items())
            print(f"  {label:5} {numel:>7,} el: {cells}")
            for key, (_d, b, pg) in entries.items():
                if key.startswith("qmap"):
                    continue  # one per optimizer, shared by every tensor: left out of the sums
                paged += b if pg else 0
                device += 0 if pg else b
        print(
            f"  paged {paged:,} B; device (without the shared qmaps) {device:,} B; qmaps shared: {_shared_qmaps(name)}"
        )


if __name__ == "__main__":
    main()
