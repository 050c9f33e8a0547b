"""Where a measured case's backward peaks: the live bytes of step 2's backward, op by op, tagged with the decoder
layer (and its part: norm, mixer, MLP) autograd is in, by kind (tools.measure's own tracker categories).

    python tools/measure/backward_timeline.py CASES.json CASE_ID            # each tagged stretch's high point
    python tools/measure/backward_timeline.py CASES.json CASE_ID --ops 0.   # every op whose tag holds "0."

CASES.json is an accuracy or a parallel (FSDP2 / DDP rank) cases file; the case runs as ``python -m tools.measure``
runs it (fake CUDA), with module hooks added: a forward pre-hook on every decoder layer and its direct parts (in the
backward of a checkpointed layer, its recompute) and a full backward pre-hook on each. A part's "fwd" stretch that
follows its "bwd" one is its recompute and then its own backward (the backward pre-hook of a checkpointed part fires
before the recompute it asks for). The hooks themselves may keep one tensor of the layer's output size alive (on
tiny-qwen3.5-apart one-GPU: 131,072 B above the untagged run's peak; none under FSDP2).

Used for docs/MULTI_GPU.md "Hybrid models": a checkpointed Qwen3.5 layer's backward peaks inside its flash attention
backward, after its MLP's tensors are freed (core.training.detailed._attention_after_mlp). Run with the measuring
environment's python (torch 2.13.0 CPU, transformers 5.25.0, peft 0.18.0).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from tools.measure import fake_cuda  # noqa: E402

fake_cuda.preload()

import torch  # noqa: E402
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker  # noqa: E402
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402

from tools.measure import runner  # noqa: E402

SHOWN = ("ACT", "TEMP", "GRAD", "SHARDED_GRAD", "UNSHARDED_PARAM", "ALL_GATHER", "REDUCE_SCATTER")


class Timeline:
    """The tag (which layer part autograd is in), the op being dispatched and step 2's backward, op by op."""

    def __init__(self) -> None:
        self.tag = "-"
        self.op = ""
        self.log: list[tuple[str, str, int, dict[str, int]]] = []

    def set_tag(self, tag: str) -> None:
        self.tag = tag

    def patch(self) -> None:
        timeline = self
        for cls in (MemTracker, FSDPMemTracker):  # FSDPMemTracker dispatches on its own

            def traced(tracker: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None, d: Any = None) -> Any:
                timeline.op = str(func)
                return d(tracker, func, types, args, kwargs)

            cls.__torch_dispatch__ = functools.partialmethod(traced, d=cls.__torch_dispatch__)  # type: ignore[method-assign]
        update = runner._PhaseStats._update_peak_stats

        def recorded(tracker: Any, peak_state: Any) -> None:
            update(tracker, peak_state)
            if tracker.step == 2 and tracker.phase == "backward":
                snap = tracker._dev_snap()
                if snap:
                    kinds = {str(k).split(".")[-1]: int(v) for k, v in snap.items() if k != "Total" and v}
                    timeline.log.append((timeline.tag, timeline.op, int(snap["Total"]), kinds))

        runner._PhaseStats._update_peak_stats = recorded  # type: ignore[method-assign]

    def hook(self, model: torch.nn.Module) -> None:
        for name, module in model.named_modules():
            parts = name.split(".")
            if "layers" in parts:
                depth = len(parts) - parts.index("layers")
                if depth > 3:  # the layer (layers.i) and its direct parts (layers.i.mlp) only
                    continue
                label = ".".join(parts[parts.index("layers") + 1 :])
            elif parts[-1] in ("norm", "lm_head"):
                label = parts[-1]
            else:
                continue
            module.register_forward_pre_hook(lambda m, a, label=label: self.set_tag("fwd " + label))
            module.register_full_backward_pre_hook(lambda m, g, label=label: self.set_tag("bwd " + label))


def _kinds(kinds: dict[str, int]) -> str:
    return " ".join(f"{k}={v:,}" for k, v in kinds.items() if k in SHOWN)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    cases_file, case_id = Path(argv[0]), argv[1]
    ops = argv[argv.index("--ops") + 1] if "--ops" in argv else None
    doc = json.loads(cases_file.read_text())
    case = next((c for c in doc["cases"] if c["id"] == case_id), None)
    if case is None:
        print(f"{case_id}: not in {cases_file}")
        return 2
    config = json.loads((REPO / case["config"]).read_text()) if case.get("config") else None
    if config is None:
        config = runner.load_model_configs()[case["model"]]
    timeline = Timeline()
    timeline.patch()
    build = runner._build

    def hooked(case: dict[str, Any], config: dict[str, Any], fake: bool) -> torch.nn.Module:
        model = build(case, config, fake)
        timeline.hook(model)
        return model

    runner._build = hooked  # type: ignore[assignment]
    if doc.get("format") == "vramplan-parallel-cases":
        from tools.measure import parallel

        result, _ = parallel.measure_parallel_case(case, config, "fake-cuda")
    else:
        result, _ = runner.measure_case(case, config, "fake-cuda")
    print(f"peak {result['peak_allocated_bytes']:,} B at step {result['peak_step']} {result['peak_phase']}")
    if ops is not None:
        previous = 0
        for tag, op, total, kinds in timeline.log:
            if ops in tag and total != previous:
                print(f"{tag:36s} {op:58s} {total:>12,} {total - previous:+12,} {_kinds(kinds)}")
            previous = total
        return 0
    stretches: list[list[Any]] = []  # [tag, high point, kinds there, ops]
    for tag, _, total, kinds in timeline.log:
        if stretches and stretches[-1][0] == tag:
            if total > stretches[-1][1]:
                stretches[-1][1:3] = [total, kinds]
            stretches[-1][3] += 1
        else:
            stretches.append([tag, total, kinds, 1])
    for tag, total, kinds, count in stretches:
        print(f"{tag:36s} {total:>12,}  {count:5d} ops  {_kinds(kinds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
