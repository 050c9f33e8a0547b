"""DeepSpeed's own model-state estimators against this estimator's, for the same plans.

DeepSpeed ships four functions that print the memory ZeRO needs for parameters, gradients
and optimizer state (deepspeed.runtime.zero.stage_1_and_2 / stage3,
``estimate_zero{2,3}_model_states_mem_needs_all_{cold,live}``). ``--collect`` runs them
(DeepSpeed installed, no GPU needed) and writes what they print, verbatim, to
benchmarks/parallel/deepspeed_estimates.json; without it the script reads that file and
prints DeepSpeed's per-GPU and per-CPU figures beside this estimator's model-state terms
for the same plan (weights + gradients + optimizer state of the worst rank; host memory).

    .venv-ds/bin/python benchmarks/deepspeed_compare.py --collect
    .venv/bin/python benchmarks/deepspeed_compare.py

What DeepSpeed's formulas count (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py,
v0.19.8), per parameter P of the model, N GPUs, n nodes, G GPUs per node:

- ZeRO-2 on the GPU: 2·P (16-bit parameters, replicated) + 18·P / N, where 18 = 16-bit
  gradients 2 + fp32 gradients 4 + fp32 master parameters 4 + Adam moments 8. With the
  optimizer offloaded: 2·P. On the CPU, per node: 4·P·G × 1.5 (the model loaded in fp32 by
  every process, with a 1.5 buffer factor), or with offload max(4·N, 16)·P × 1.5.
- ZeRO-3 on the GPU: 4 × the largest layer (its gathered 16-bit parameters and gradients)
  + 18·P / N; with the optimizer offloaded 4·L + 2·P / N; with the parameters too 4·L. On
  the CPU, per node: 18·P / n × 1.5 with both offloaded, 16·P / n × 1.5 with the optimizer
  only (zero_init), L·4·G × 1.5 without offload.

Where this estimator agrees, term by term (tests/core/test_deepspeed_compare.py), on one
GPU as on many (DeepSpeed runs its ZeRO optimizer at any world size; with one GPU the
partition is the whole model): at the optimizer step ZeRO-2 holds exactly DeepSpeed's
2·P + 18·P/N (16-bit parameters; 16-bit and float32 gradient partitions, float32 master
and Adam state), so its figure is DeepSpeed's to the printed hundredth of a GiB; ZeRO-3
holds the 2·P/N shard, the same master and Adam state, and DeepSpeed's largest layer L
gathered (with the prefetch bucket); offloaded, the host holds DeepSpeed's terms without
its 1.5 buffer factor, and the GPU what DeepSpeed leaves there: ZeRO-3 allocates its
gradient partition on the CPU (stage3.py v0.19.6: ``self.device`` is the CPU when the
optimizer is offloaded, and ``grad_partitions_flat_buffer`` is made on it), ZeRO-2 copies
each reduced gradient straight to the host's float32 partition (stage_1_and_2.py
``copy_grads_in_partition`` with ``cpu_offload``: no ``grads_in_partition`` on the GPU).

Where it differs: DeepSpeed's figure is the optimizer step's, while this estimator's peak
may be the backward (activations), where ZeRO-2 holds the reduce bucket instead of the
gradient partitions; ZeRO-3 casts the float32 gradient one sub-group (1e9 elements) at a
time, which DeepSpeed's 18·P/N does not model, and keeps its gradient partition in the
16-bit grad_accum_dtype (DeepSpeed counts 4 bytes); DeepSpeed's 4·L is L's parameters and
gradients, this estimator's 2·(L + prefetch) the gathered parameters (gradients land in the
reduce bucket); ZeRO-2 with offload keeps a 16-bit staging buffer of the largest parameter
on the GPU (``temp_grad_buffer_for_gpu_offload``) and, at the peak, the reduce bucket and
the head's gradient, none of which DeepSpeed's 2·P counts; DeepSpeed's ZeRO-2 offload CPU
figure grows with every GPU of the cluster (4·N·P, the fp32 model each process loads), this
one counts the processes of one node.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "parallel" / "deepspeed_estimates.json"
MODELS = ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "llama-3.1-70b")
SETUPS = ((1, 1), (1, 8), (4, 8))  # (nodes, GPUs per node)
GIB = 2**30
# A row DeepSpeed prints: "   17.26GB |   2.31GB | offload_optimizer=cpu "
ROW = re.compile(r"^\s*([\d.]+)GB \|\s*([\d.]+)GB \| (.*)$")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def largest_layer_params(model_id: str) -> int:
    """The parameters of the largest single module, as DeepSpeed's ``model_to_params`` counts
    them (a module's own parameters, not its children's): the embedding or the LM head for
    these models, else the largest projection with its bias."""
    from core.catalogue import find_model

    spec = find_model(model_id).spec
    linears = [rows * cols + cols for rows, cols in spec.linear_shapes().values()]
    return max(spec.embedding_params(), spec.head_params(), *linears)


def parse_rows(printed: str) -> list[dict[str, Any]]:
    rows = []
    for line in printed.splitlines():
        match = ROW.match(line)
        if match:
            cpu, gpu, options = match.groups()
            rows.append({"per_cpu_gib": float(cpu), "per_gpu_gib": float(gpu), "options": options.strip()})
    return rows


def collect() -> dict[str, Any]:
    import deepspeed
    import torch
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold

    from core.catalogue import find_model

    runs = []
    for model_id in MODELS:
        total = find_model(model_id).spec.total_params()
        largest = largest_layer_params(model_id)
        for nodes, per_node in SETUPS:
            for stage in (2, 3):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    if stage == 2:
                        estimate_zero2_model_states_mem_needs_all_cold(
                            total_params=total, num_gpus_per_node=per_node, num_nodes=nodes
                        )
                    else:
                        estimate_zero3_model_states_mem_needs_all_cold(
                            total_params=total,
                            largest_layer_params=largest,
                            num_gpus_per_node=per_node,
                            num_nodes=nodes,
                        )
                printed = out.getvalue()
                runs.append(
                    {
                        "model": model_id,
                        "total_params": total,
                        "largest_layer_params": largest,
                        "stage": stage,
                        "nodes": nodes,
                        "gpus_per_node": per_node,
                        "function": f"estimate_zero{stage}_model_states_mem_needs_all_cold",
                        "printed": printed,
                        "rows": parse_rows(printed),
                    }
                )
    live = _live_check()
    return {
        "format": "vramplan-deepspeed-estimates",
        "deepspeed_version": deepspeed.__version__,
        "torch_version": torch.__version__,
        "command": ".venv-ds/bin/python benchmarks/deepspeed_compare.py --collect",
        "parameter_counts": "core.catalogue (the models' config.json through core.hfconfig); "
        "largest layer: the embedding / LM head (vocab × hidden)",
        "runs": runs,
        "live_check": live,
    }


def _live_check() -> dict[str, Any]:
    """The ``_all_live`` variant on a real (CPU, bf16) Llama 3.2 1B built from its config:
    its printed count must be the catalogue's, so the ``_all_cold`` calls above are fed the
    numbers DeepSpeed would derive itself."""
    try:
        import torch
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_live
        from transformers import AutoModelForCausalLM, LlamaConfig
    except ImportError as exc:  # transformers is optional for --collect
        return {"skipped": str(exc)}
    from core.catalogue import find_model

    entry = find_model("llama-3.2-1b")
    config = LlamaConfig(**{k: v for k, v in entry.config.items() if k not in ("architectures", "model_type")})
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        estimate_zero3_model_states_mem_needs_all_live(model, num_gpus_per_node=8, num_nodes=1)
    return {
        "model": "llama-3.2-1b",
        "function": "estimate_zero3_model_states_mem_needs_all_live",
        "printed": out.getvalue(),
    }


# ---- the comparison (no DeepSpeed needed) -------------------------------------------


@dataclass(frozen=True)
class Comparison:
    model: str
    stage: int
    nodes: int
    gpus_per_node: int
    options: str
    deepspeed_gpu_gib: float
    ours_gpu_gib: float  # at the worst rank's peak
    ours_step_gib: float  # at its optimizer step
    deepspeed_cpu_gib: float
    ours_cpu_gib: float | None  # host memory per node, where the estimate gives it
    why: str

    @property
    def gpu_difference(self) -> float:
        return self.ours_gpu_gib / self.deepspeed_gpu_gib - 1 if self.deepspeed_gpu_gib else 0.0


def load(path: Path = DATA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _offload(options: str) -> str:
    """What a printed row offloads. DeepSpeed 0.19.8 on Python 3.11 prints the device as
    ``OffloadDeviceEnum.cpu`` (an f-string of a str-mixin Enum), older ones as ``cpu``."""
    if "offload_param=none" not in options and "offload_param=" in options:
        return "params"
    return "optimizer" if "offload_optimizer=none" not in options else "none"


def plan_for(run: dict[str, Any], options: str) -> Any:
    """This estimator's plan for one DeepSpeed row: full fine-tuning with AdamW of a model
    loaded in bf16 (DeepSpeed's bf16 mode: 16-bit parameters and gradients, its own float32
    master and Adam state), the row's ZeRO stage, GPUs and offload."""
    from core.plan import Method, Offload, Preset, Strategy
    from core.presets import plan_for_model

    plan = plan_for_model(run["model"], method=Method.FULL, preset=Preset.TRAINER_BF16)
    return plan.with_parallel(
        nodes=run["nodes"],
        gpus_per_node=run["gpus_per_node"],
        strategy=Strategy.ZERO2 if run["stage"] == 2 else Strategy.ZERO3,
        offload=Offload(_offload(options)),
    )


def model_state_bytes(est: Any, at_step: bool = False) -> float:
    """Weights + gradients + optimizer state of the worst rank, at its peak or at the
    optimizer step (where DeepSpeed's float32 gradient partition exists)."""
    from core.breakdown import BucketKey, StepPhase

    buckets = est.worst.buckets
    if at_step:
        buckets = next(p for p in est.worst.phases if p.kind is StepPhase.OPTIMIZER).buckets
    keys = (BucketKey.WEIGHTS, BucketKey.GRADIENTS, BucketKey.OPTIMIZER)
    return float(sum(b.bytes for b in buckets if b.key in keys))


def _why(stage: int, offload: str, gpus: int) -> str:
    """Where the two differ, term by term (the CI test holds the shared terms equal)."""
    if stage == 2 and offload == "none":
        if gpus == 1:
            return "one GPU, partition = the model: the same 2·P + 18·P at the step, and at the peak"
        return "at the step the same 2·P + 18·P/N; the peak (backward) holds the reduce bucket, not the partitions"
    if stage == 2:
        return "same 2·P; ours adds a largest-parameter staging buffer, ipg bucket, head grad; DS CPU: 4·P·N × 1.5"
    if offload == "none":
        return "DS 4·L + 18·P/N (not itemised); ours 16·P/N (16-bit partitions, master, Adam), 2·(L + prefetch), ipg"
    if offload == "optimizer":
        return "same 2·P/N shard; DS 4·L, ours 2·(L + prefetch) + ipg (gradient partition on the CPU, as DS)"
    return "DS 4·L only; ours 2·(L + prefetch) + ipg (gradient partition on the CPU, as DS); CPU: DS × 1.5"


def compare(data: dict[str, Any]) -> list[Comparison]:
    from core.estimate import estimate

    rows = []
    for run in data["runs"]:
        for row in run["rows"]:
            if "zero_init=0" in row["options"]:
                continue  # zero_init=0 is the CPU while loading the model, not the training step
            est = estimate(plan_for(run, row["options"]))
            host = getattr(est, "host", None)
            rows.append(
                Comparison(
                    model=run["model"],
                    stage=run["stage"],
                    nodes=run["nodes"],
                    gpus_per_node=run["gpus_per_node"],
                    options=row["options"],
                    deepspeed_gpu_gib=row["per_gpu_gib"],
                    ours_gpu_gib=model_state_bytes(est) / GIB,
                    ours_step_gib=model_state_bytes(est, at_step=True) / GIB,
                    deepspeed_cpu_gib=row["per_cpu_gib"],
                    ours_cpu_gib=None if host is None else host.bytes / GIB,
                    why=_why(run["stage"], _offload(row["options"]), run["nodes"] * run["gpus_per_node"]),
                )
            )
    return rows


def render(rows: list[Comparison], version: str) -> str:
    lines = [
        f"DeepSpeed {version} model-state estimates vs this estimator (GiB; ours = worst rank's weights + "
        "gradients + optimizer state at its peak and at the optimizer step; CPU = per node)",
        f"{'model':<14} {'ZeRO':>4} {'GPUs':>6} {'offload':<9} {'DS GPU':>8} {'ours':>8} {'diff':>7} {'at step':>8} "
        f"{'DS CPU':>8} {'ours':>8}  why",
    ]
    for r in rows:
        ours_cpu = "-" if r.ours_cpu_gib is None else f"{r.ours_cpu_gib:.2f}"
        lines.append(
            f"{r.model:<14} {r.stage:>4} {r.nodes}×{r.gpus_per_node:<4} {_offload(r.options):<9} "
            f"{r.deepspeed_gpu_gib:>8.2f} {r.ours_gpu_gib:>8.2f} {r.gpu_difference:>+7.1%} {r.ours_step_gib:>8.2f} "
            f"{r.deepspeed_cpu_gib:>8.2f} {ours_cpu:>8}  {r.why}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collect", action="store_true", help="run DeepSpeed's estimators and write the JSON")
    args = parser.parse_args(argv)
    if args.collect:
        data = collect()
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {DATA.relative_to(ROOT)}: {len(data['runs'])} runs, DeepSpeed {data['deepspeed_version']}")
        return 0
    data = load()
    print(render(compare(data), data["deepspeed_version"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
