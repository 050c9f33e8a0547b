"""What one Mamba-2 mixer keeps for the backward on transformers' torch path, tensor by tensor (core.training.mamba).

    python tools/measure/mamba_saved.py tiny-granite-4.0-h [--frozen] [--batch 2] [--seq 1024]
    python tools/measure/mamba_saved.py tiny-nemotron-h --backward      # the backward's transient (CPU, bf16)

The config is benchmarks/accuracy/configs/<name>.json. Saved tensors: the mixer alone (Granite 4.0-H's
GraniteMoeHybridMambaLayer or Nemotron-H's NemotronHMamba2Mixer, no cache, training mode, the input needing a
gradient) runs under torch.autograd.graph.saved_tensors_hooks on fake CUDA tensors (tools.measure's fake_cuda:
autocast("cuda") as on a GPU), twice: 16-bit weights without autocast, then float32 weights under bf16 autocast.
Each storage is listed once; the mixer's own parameters are left out, the input and the autocast weight casts are
listed (core.training.mamba counts neither: the block's readers and core.training.storage do). ``--frozen``: the
weights need no gradient (LoRA's frozen base). ``--backward``: the live storage bytes (live_bytes.LiveBytes) over
the mixer's backward on real CPU tensors in bf16, above what the forward left: the transient
core.training.mamba.torch_path_backward counts.

Run with the measuring environment's python (torch 2.13.0 CPU, transformers 5.25.0, without mamba_ssm).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _mixer(name: str, chunk: int | None) -> tuple[Any, Any]:
    from transformers import CONFIG_MAPPING
    from transformers.models.granitemoehybrid.modeling_granitemoehybrid import GraniteMoeHybridMambaLayer
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    doc = json.loads((REPO / "benchmarks" / "accuracy" / "configs" / f"{name}.json").read_text())
    model_type = doc.pop("model_type")
    if chunk:
        doc["chunk_size" if model_type == "nemotron_h" else "mamba_chunk_size"] = chunk
    config = CONFIG_MAPPING[model_type](**doc)
    cls = NemotronHMamba2Mixer if model_type == "nemotron_h" else GraniteMoeHybridMambaLayer
    return config, cls


def saved(name: str, b: int, s: int, frozen: bool, autocast: bool) -> int:
    """The saved storages of one forward, printed; returns their bytes (the parameters left out)."""
    config, cls = _mixer(name, None)
    how = "float32 weights, bf16 autocast" if autocast else "bf16 weights"
    label = f"{name} B={b} S={s} {how}{' frozen' if frozen else ''}"
    return record_saved(
        lambda: (cls(config, 0), ()), lambda layer, x: layer(x), (b, s, config.hidden_size), frozen, autocast, label
    )


def record_saved(
    make: Callable[[], tuple[Any, tuple[Any, ...]]],
    run: Callable[..., Any],
    shape: tuple[int, int, int],
    frozen: bool,
    autocast: bool,
    label: str,
) -> int:
    """Run ``run(layer, x, *helpers)`` on the layer ``make()`` builds (with helper modules, moved to the fake GPU
    too) under saved_tensors_hooks on fake CUDA; print each saved storage once (the layer's parameters left out)
    and return their bytes. gdn_saved.py uses it as well."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from tools.measure import runner

    weight = torch.float32 if autocast else torch.bfloat16
    seen: dict[int, tuple[tuple[int, ...], str, int]] = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        stack.enter_context(runner.fake_tensor_environment())
        stack.enter_context(runner.fake_cuda_environment())
        layer, helpers = make()
        layer = layer.to(dtype=weight)
        for module in (layer, *helpers):
            runner._to_device_inplace(module, torch.device("cuda"))
        layer.train()
        for p in layer.parameters():
            p.requires_grad_(not frozen)
        own = {id(p.untyped_storage()) for p in layer.parameters()}
        x = torch.zeros(*shape, dtype=weight, device="cuda", requires_grad=True)

        def pack(t: Any) -> Any:
            storage = t.untyped_storage()
            if id(storage) not in own and id(storage) not in seen and storage.nbytes():
                seen[id(storage)] = (tuple(t.shape), str(t.dtype).removeprefix("torch."), storage.nbytes())
            return t

        cast = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cast:
            run(layer, x, *helpers)
    for dims, dtype, nbytes in seen.values():
        print(f"  {dims!s:36} {dtype:9} {nbytes:>14,}")
    total = sum(nbytes for _, _, nbytes in seen.values())
    print(f"{label}: {total:,} B saved")
    return total


def backward(name: str, b: int, s: int, frozen: bool, chunk: int | None) -> int:
    import torch

    sys.path.insert(0, str(HERE))
    from live_bytes import LiveBytes

    config, cls = _mixer(name, chunk)
    layer = cls(config, 0).to(torch.bfloat16)
    for p in layer.parameters():
        p.requires_grad_(not frozen)
    x = torch.randn(b, s, config.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    mode = LiveBytes()
    with mode:
        y = layer(x)
        start = mode.live
        mode.peak = start
        y.backward(torch.ones_like(y))
    print(
        f"{name} B={b} S={s} chunk {layer.chunk_size}{' frozen' if frozen else ''}: "
        f"{mode.peak - start:,} B over the forward's {start:,} B (at {mode.at})"
    )
    return mode.peak - start


def parser(doc: str | None, config_help: str) -> argparse.ArgumentParser:
    """The command line both tools take (gdn_saved.py adds --attention)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help=config_help)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--frozen", action="store_true")
    ap.add_argument("--backward", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, "a benchmarks/accuracy/configs name: tiny-granite-4.0-h, tiny-nemotron-h")
    ap.add_argument("--chunk", type=int, default=None, help="--backward: another scan chunk than the config's")
    args = ap.parse_args(argv)
    if args.backward:
        backward(args.config, args.batch, args.seq, args.frozen, args.chunk)
        return 0
    sys.path.insert(0, str(REPO))
    from tools.measure import fake_cuda

    fake_cuda.preload()
    for autocast in (False, True):
        saved(args.config, args.batch, args.seq, args.frozen, autocast)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
