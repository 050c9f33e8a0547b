"""Where a tiny hybrid's training step peaks, storage by storage (core.training.mamba.torch_path_recompute, the
relu2 rule of core.training.activations, and what tools.measure's tracker added to checkpointed steps before
runner.StepModTracker: ``--untracked`` is the reference the tracked run now matches).

    python tools/measure/hybrid_live.py CASE_ID              # fake CUDA, step 1: backward high point per layer
    python tools/measure/hybrid_live.py CASE_ID --phase F:model.layers.0.mamba.in_proj   # one module's high point
    python tools/measure/hybrid_live.py CASE_ID --layers     # fake CUDA: live bytes per layer as the backward starts
    python tools/measure/hybrid_live.py CASE_ID --untracked  # real CPU, bf16: two steps with no module hooks
    ... [--cpu] [--batch B] [--seq S]     # trace real CPU tensors (bf16 cases); another micro-batch or length

CASE_ID is a case of benchmarks/accuracy/cases_hybrid.json (model built by tools.measure.runner as the measured
run builds it). The live storages are counted by a TorchDispatchMode (every storage an op makes, once, until it
dies; rounded to 512 B on fake CUDA as MemTracker rounds), parameters and their views left out. ``--phase`` and
the default label each op by the last module whose forward (F:) or backward (B:) pre-hook ran: the forward's ops
inside the backward are a checkpointed block's recomputation. ``--untracked`` runs the case's model on real CPU
tensors in bf16 (no autocast: bf16 cases only) under the same mode but without any module hook, AdamW for-loop,
and prints each step's backward peak: the run tools.measure's MemTracker tracks, less the tracker.

Run with the measuring environment's python (torch 2.13.0 CPU, transformers 5.25.0, peft 0.18.0).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import re
import sys
import weakref
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))


def _case(case_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    cases = json.loads((REPO / "benchmarks" / "accuracy" / "cases_hybrid.json").read_text())["cases"]
    case = next(c for c in cases if c["id"] == case_id)
    return case, json.loads((REPO / case["config"]).read_text())


def _live_mode(round_to: int, skip: set[int], fake: bool) -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Live(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live, self.peak, self.phase, self.on, self.ops = 0, 0, "", False, 0
            self.seen: dict[int, tuple[int, tuple[int, ...], str, str, int]] = {}
            self.high: dict[str, tuple[int, str, dict[int, tuple[int, tuple[int, ...], str, str, int]]]] = {}

        def _free(self, key: int, size: int) -> None:
            self.live -= size
            self.seen.pop(key, None)

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                storage = t.untyped_storage()
                key = id(storage) if fake else storage.data_ptr()
                if key in self.seen or key in skip or not storage.nbytes():
                    continue
                size = -(-storage.nbytes() // round_to) * round_to
                self.seen[key] = (size, tuple(t.shape), str(t.dtype).removeprefix("torch."), self.phase, self.ops)
                self.live += size
                weakref.finalize(storage, self._free, key, size)
            self.peak = max(self.peak, self.live)
            if self.on and self.live > self.high.get(self.phase, (0,))[0]:
                self.high[self.phase] = (self.live, str(func), dict(self.seen))
            return out

    return Live()


def traced(case: dict[str, Any], config: dict[str, Any], phase: str | None, layers: bool, backend: str) -> None:
    """Step 1 of the case on fake CUDA (or real CPU tensors): the backward's high point per layer (or one
    module's, with the gradients formed by then apart), or the live bytes per layer as the backward starts."""
    from tools.measure import fake_cuda

    fake_cuda.preload()
    import torch

    from tools.measure import runner

    on_cpu = backend == "cpu"
    with contextlib.ExitStack() as stack:
        fake, device = runner._enter_backend(stack, backend)
        model = runner.prepared_model(case, config, fake, device)
        ids = runner._token_ids(int(case["micro_batch"]), int(case["seq_len"]), int(config["vocab_size"]), device, fake)
        keys = {id(p.untyped_storage()) if fake else p.untyped_storage().data_ptr() for p in model.parameters()}
        mode = _live_mode(1 if on_cpu else 512, keys, fake)
        names = {m: n for n, m in model.named_modules()}
        for module in model.modules():
            if module is not model:
                module.register_forward_pre_hook(lambda m, a: setattr(mode, "phase", "F:" + names[m]))
                module.register_full_backward_pre_hook(lambda m, g: setattr(mode, "phase", "B:" + names[m]))
        autocast = runner.resolve_knobs(case)["autocast"]
        cast = torch.autocast(device.type, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        gc.disable()
        with mode:
            with cast:
                loss = model(input_ids=ids, labels=ids).loss
            if layers:
                by: dict[str, int] = {}
                for size, _, _, where, _ in mode.seen.values():
                    found = re.match(r"F:(?:base_model\.model\.)?model\.layers\.(\d+)", where)
                    key = f"layer {found.group(1)}" if found else where.split(".")[0]
                    by[key] = by.get(key, 0) + size
                for key, size in by.items():
                    print(f"{size:>14,}  {key}")
                return
            mode.on, mode.phase = True, "backward"
            loss.backward()
        grads = {}
        for p in model.parameters():
            key = id(p.grad.untyped_storage()) if fake else p.grad.untyped_storage().data_ptr()
            grads[key] = mode.seen[key][4] if key in mode.seen else -1
    if phase is not None:
        live, op, snap = mode.high[phase]
        formed = sum(v[0] for k, v in snap.items() if grads.get(k) == v[4])
        print(f"{phase}: {live:,} B live at {op}: {formed:,} B of gradients, {live - formed:,} B of other tensors")
        for key, (size, shape, dtype, where, _) in snap.items():
            if grads.get(key) != snap[key][4]:
                print(f"  {size:>12,} {shape!s:30} {dtype:9} {where}")
        return
    regions: dict[str, tuple[int, str]] = {}
    for where, (live, op, _) in mode.high.items():
        found = re.match(r"([FB]):(?:base_model\.model\.)?model\.layers\.(\d+)", where)
        key = f"{'recompute' if found.group(1) == 'F' else 'backward'} layer {found.group(2)}" if found else where
        if live > regions.get(key, (0, ""))[0]:
            regions[key] = (live, f"{op} in {where}")
    for key, (live, at) in regions.items():
        print(f"{live:>14,}  {key}  ({at})")


def untracked(case: dict[str, Any], config: dict[str, Any]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), attn_implementation="sdpa")
    model = model.to(torch.bfloat16)
    if case["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        lora = case["lora"]
        model = get_peft_model(
            model, LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], target_modules=lora["targets"])
        )
    model.train()
    if case.get("checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, foreach=False)
    ids = torch.randint(0, int(config["vocab_size"]), (int(case["micro_batch"]), int(case["seq_len"])))
    stored = sum(p.untyped_storage().nbytes() for p in model.parameters())
    mode = _live_mode(1, {p.untyped_storage().data_ptr() for p in model.parameters()}, False)
    gc.disable()
    with mode:
        for step in (1, 2):
            loss = model(input_ids=ids, labels=ids).loss
            mode.peak = mode.live
            loss.backward()
            del loss
            print(f"step {step}: backward peak {mode.peak + stored:,} B with the parameters ({stored:,} B)")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            gc.collect()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("--phase", default=None, help="print the live storages at this module label's high point")
    ap.add_argument("--layers", action="store_true")
    ap.add_argument("--untracked", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="trace real CPU tensors (bf16 cases), not fake CUDA")
    ap.add_argument("--batch", type=int, default=None, help="another micro-batch than the case's")
    ap.add_argument("--seq", type=int, default=None, help="another sequence length than the case's")
    args = ap.parse_args(argv)
    case, config = _case(args.case)
    case = {**case, "micro_batch": args.batch or case["micro_batch"], "seq_len": args.seq or case["seq_len"]}
    if args.untracked:
        untracked(case, config)
    else:
        traced(case, config, args.phase, args.layers, "cpu" if args.cpu else "fake-cuda")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
