"""Self-check of the measurement tool.

Part 1 (this process, no fake-CUDA shim): tiny 2-layer Llama and GPT-2 configs run the
same two training steps (a) for real on the CPU and (b) under FakeTensorMode on the CPU
device, both accounted by the same PhaseMemTracker. Peaks, per-phase peaks, peak
location and breakdown must agree exactly: this shows fake execution allocates and frees
exactly what real execution does.

Part 2 (subprocess with the shim preloaded): fake-CUDA behaviour checks: autocast
really casts weights to bf16, SDPA kernel routing, foreach AdamW's extra param copy, SiLU's backward one op,
and for one rank of DDP / FSDP2 (fake process group): shard sizes and bucket layout.

Part 3 (this process): one rank of DDP and FSDP2 with a fake process group, real CPU
tensors vs FakeTensorMode on the CPU, same tracker: identical to the byte (this covers
DDP's bucket rebuild through _HostScratchMode and FSDP2's resize-based unsharding).

Part 4 (this process): checkpointed tiny Llamas (full, LoRA, frozen layers, DoRA) on real CPU tensors, tracked by
PhaseMemTracker and untracked (a dispatch mode that only counts live storages, no module hooks): the per-phase
peaks of both steps identical to the byte. It also runs them with torch's stock ModTracker and prints what that
kept beyond the untracked run (runner.StepModTracker says why).

Usage: .venv-measure/bin/python -m tools.measure.selfcheck
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

TINY_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
}
TINY_GPT2 = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "n_layer": 2,
    "n_embd": 64,
    "n_head": 4,
    "n_positions": 256,
    "n_ctx": 256,
    "vocab_size": 1000,
    "resid_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "activation_function": "gelu_new",
}
TINY_QWEN3_MOE = {
    "model_type": "qwen3_moe",
    "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 160,
    "moe_intermediate_size": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": True,
}
TINY_MISTRAL_SW = {  # a sliding window shorter than the prompt: DynamicSlidingWindowLayer in serving
    **TINY_LLAMA,
    "model_type": "mistral",
    "architectures": ["MistralForCausalLM"],
    "sliding_window": 32,
}
LORA_QV = {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"], "dropout": 0.0}
LORA_ALL = {**LORA_QV, "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def _case(id_: str, model: str, **kw: Any) -> dict[str, Any]:
    c = {
        "id": id_,
        "model": model,
        "method": "full",
        "precision": "fp32",
        "optimizer": "adamw",
        "attention": "sdpa",
        "checkpointing": False,
        "micro_batch": 2,
        "seq_len": 64,
    }
    c.update(kw)
    return c


CASES = [
    (_case("tiny-llama-full-fp32-adamw-sdpa", "tiny-llama"), TINY_LLAMA),
    (_case("tiny-llama-full-fp32-adamw-eager-ckpt", "tiny-llama", attention="eager", checkpointing=True), TINY_LLAMA),
    (
        _case(
            "tiny-llama-lora-bf16-adamw-sdpa",
            "tiny-llama",
            method="lora",
            precision="bf16",
            lora={"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"], "dropout": 0.0},
        ),
        TINY_LLAMA,
    ),
    (
        _case(
            "tiny-llama-frozen-bf16mixed-sgdm-eager",
            "tiny-llama",
            method="frozen",
            frozen_layers=1,
            precision="bf16-mixed",
            optimizer="sgd-momentum",
            attention="eager",
        ),
        TINY_LLAMA,
    ),
    (_case("tiny-gpt2-full-fp32-adamw-eager", "tiny-gpt2", attention="eager", micro_batch=4), TINY_GPT2),
    (_case("tiny-gpt2-full-fp32-sgd-sdpa-ckpt", "tiny-gpt2", optimizer="sgd", checkpointing=True), TINY_GPT2),
    (
        _case(
            "tiny-gpt2-lora-fp32-adamw-sdpa",
            "tiny-gpt2",
            method="lora",
            lora={"rank": 4, "alpha": 8, "targets": ["c_attn"], "dropout": 0.0},
        ),
        TINY_GPT2,
    ),
    # the precision-role keys, DoRA and MoE (grouped_mm) paths
    # DoRA: with torch's stock ModTracker its forward sat in a reference cycle (the hooks'),
    # equal only because the runner pauses the cyclic collector; StepModTracker makes none (NOTES.md).
    (_case("tiny-llama-dora-fp32-adamw-sdpa", "tiny-llama", method="dora", lora=LORA_QV), TINY_LLAMA),
    (
        _case(
            "tiny-llama-lora-bf16w-bf16adapters-noautocast",
            "tiny-llama",
            method="lora",
            lora=LORA_QV,
            precision="bf16",
            weight_dtype="bf16",
            adapter_dtype="bf16",
            autocast=None,
        ),
        TINY_LLAMA,
    ),
    (
        _case(
            "tiny-llama-full-bf16w-autocast-sgdm",
            "tiny-llama",
            precision="bf16",
            weight_dtype="bf16",
            autocast="bf16",
            optimizer="sgd-momentum",
        ),
        TINY_LLAMA,
    ),
    # grouped_mm (transformers 5 MoE experts) takes bf16 only (torch 2.13 meta kernel)
    (
        _case("tiny-qwen3moe-full-bf16w-adamw-sdpa", "tiny-qwen3-moe", precision="bf16", weight_dtype="bf16"),
        TINY_QWEN3_MOE,
    ),
]
KNOWN_DIFF: set[str] = set()  # case ids whose real/fake difference is understood and documented
SERVING = [
    (
        {
            "id": "tiny-llama-serve",
            "model": "tiny-llama",
            "batch": 2,
            "prompt_len": 64,
            "new_tokens": 3,
            "weight_dtype": "bf16",
            "attention": "sdpa",
        },
        TINY_LLAMA,
    ),
    (
        {
            "id": "tiny-mistral-sliding-serve",
            "model": "tiny-mistral",
            "batch": 2,
            "prompt_len": 64,
            "new_tokens": 2,
            "weight_dtype": "bf16",
            "attention": "sdpa",
        },
        TINY_MISTRAL_SW,
    ),
]
_SERVING_COMPARED = ("peak_bytes", "peak_phase", "breakdown", "kv_cache_after", "phase_peaks", "parameters")

_COMPARED = ("peak_allocated_bytes", "peak_step", "peak_phase", "breakdown_at_peak", "phase_peaks", "parameters")
PARALLEL = [
    (_case("tiny-llama-ddp-w4", "tiny-llama", strategy="ddp", world_size=4), TINY_LLAMA),
    (
        _case(
            "tiny-llama-ddp-gradview-smallbuckets-w4",
            "tiny-llama",
            strategy="ddp",
            world_size=4,
            gradient_as_bucket_view=True,
            bucket_cap_mb=0.05,
        ),
        TINY_LLAMA,
    ),
    (_case("tiny-llama-fsdp-w4", "tiny-llama", strategy="fsdp", world_size=4), TINY_LLAMA),
    (
        _case(
            "tiny-llama-fsdp-mp-noreshard-ckpt-w3",
            "tiny-llama",
            strategy="fsdp",
            world_size=3,
            checkpointing=True,
            mp_param_dtype="bf16",
            mp_reduce_dtype="fp32",
            reshard_after_forward=False,
        ),
        TINY_LLAMA,
    ),
    (
        _case(
            "tiny-llama-fsdp-lora-bf16-w2",
            "tiny-llama",
            strategy="fsdp",
            world_size=2,
            method="lora",
            lora=LORA_QV,
            precision="bf16",
            weight_dtype="bf16",
        ),
        TINY_LLAMA,
    ),
]
# Part 4: checkpointed steps, where torch's stock ModTracker kept tensors an untracked run frees (4 layers,
# 128 positions for LoRA and frozen layers: the retention grows with the blocks before the last one).
_FOUR_LAYERS = {**TINY_LLAMA, "num_hidden_layers": 4}
CHECKPOINTED = [
    (_case(f"ckpt-llama-{name}", "tiny-llama", checkpointing=True, **kw), cfg)
    for name, cfg, kw in (
        ("full-fp32-adamw-eager", TINY_LLAMA, {"attention": "eager"}),
        (
            "lora-bf16-adamw-sdpa",
            _FOUR_LAYERS,
            {"method": "lora", "precision": "bf16", "lora": LORA_QV, "seq_len": 128},
        ),
        ("frozen2-fp32-adamw-sdpa", _FOUR_LAYERS, {"method": "frozen", "frozen_layers": 2, "seq_len": 128}),
        # DoRA on every linear with a wide MLP and 16 tokens: one layer's B·A-from-an-identity transient sets the
        # peak (core.training.activations.dora_forward_transient; branch h78remeas)
        (
            "dora-all-fp32-adamw-sdpa-wide",
            {**TINY_LLAMA, "intermediate_size": 1024},
            {"method": "dora", "lora": LORA_ALL, "micro_batch": 1, "seq_len": 16},
        ),
    )
]
_PARALLEL_COMPARED = (*_COMPARED, "phase_breakdowns", "rank_parameters", "ddp_buckets", "fsdp_units")


def part1() -> bool:
    from . import runner

    ok_all = True
    runs = [(c, cfg, runner.measure_case, _COMPARED, "peak_allocated_bytes") for c, cfg in CASES]
    runs += [(c, cfg, runner.measure_serving_case, _SERVING_COMPARED, "peak_bytes") for c, cfg in SERVING]
    if "--no-parallel" not in sys.argv:
        from . import parallel

        measure_rank = parallel.measure_parallel_case
        runs += [(c, cfg, measure_rank, _PARALLEL_COMPARED, "peak_allocated_bytes") for c, cfg in PARALLEL]
    for case, cfg, measure, compared, peak_key in runs:
        t = time.perf_counter()
        real, _ = measure(case, cfg, "cpu")
        fake, _ = measure(case, cfg, "fake-cpu")
        diffs = [k for k in compared if real.get(k) != fake.get(k)]
        ok = not diffs
        known = bool(diffs) and case["id"] in KNOWN_DIFF
        ok_all &= ok or known

        print(
            f"{'PASS' if ok else 'KNOWN' if known else 'FAIL'} {case['id']}: real-cpu peak={real[peak_key]} "
            f"fake-cpu peak={fake[peak_key]} ({real.get('peak_step', 1)} {real['peak_phase']}) "
            f"{'' if ok else 'DIFF ' + str(diffs)} [{time.perf_counter() - t:.1f}s]",
            flush=True,
        )
        if diffs:
            for k in diffs:
                print(f"   {k}: real={json.dumps(real.get(k))}\n   {' ' * len(k)}  fake={json.dumps(fake.get(k))}")
    return ok_all


# --------------------------------------------------------------------------- part 2
def part2() -> bool:
    from . import fake_cuda

    fake_cuda.preload()
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from . import runner
    from . import sdpa as sdpa_mod

    ok_all = True

    def check(name: str, cond: bool, detail: str = "") -> None:
        nonlocal ok_all
        ok_all &= bool(cond)
        print(f"{'PASS' if cond else 'FAIL'} fake-cuda: {name} {detail}", flush=True)

    # autocast: record dtypes of matmul inputs and casts of parameters during the forward
    class Rec(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.mm_dtypes: set[tuple[str, ...]] = set()
            self.casts_to_bf16 = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default):
                self.mm_dtypes.add(tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor)))
            if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16:
                self.casts_to_bf16 += 1
            return func(*args, **kwargs)

    rec = Rec()
    orig_ws = sdpa_mod.KernelWorkspaceMode

    class WsRec(orig_ws):
        def __enter__(self):
            r = super().__enter__()
            rec.__enter__()
            return r

        def __exit__(self, *a):
            rec.__exit__(*a)
            return super().__exit__(*a)

    sdpa_mod.KernelWorkspaceMode = WsRec
    try:
        case = _case("t", "tiny-llama", precision="bf16-mixed")
        res, diag = runner.measure_case(case, TINY_LLAMA, "fake-cuda")
    finally:
        sdpa_mod.KernelWorkspaceMode = orig_ws
    check(
        "bf16-mixed: all matmuls in bf16",
        rec.mm_dtypes == {("torch.bfloat16", "torch.bfloat16")}
        or all(set(d) == {"torch.bfloat16"} for d in rec.mm_dtypes),
        str(sorted(rec.mm_dtypes)),
    )
    check("bf16-mixed: weights/activations cast to bf16", rec.casts_to_bf16 > 0, f"({rec.casts_to_bf16} casts)")
    check("bf16-mixed GQA llama -> flash", diag["sdpa_kernels"] == {"flash": 4}, str(diag))

    res, diag = runner.measure_case(_case("t", "tiny-llama"), TINY_LLAMA, "fake-cuda")
    check(
        "fp32 GQA llama -> math (flash needs fp16/bf16, mem-efficient has no GQA)",
        diag["sdpa_kernels"] == {"math": 4},
        str(diag),
    )
    res, diag = runner.measure_case(_case("t", "tiny-gpt2"), TINY_GPT2, "fake-cuda")
    check("fp32 MHA gpt2 -> efficient", diag["sdpa_kernels"] == {"efficient": 4}, str(diag))
    res, diag = runner.measure_case(_case("t", "tiny-gpt2", precision="bf16"), TINY_GPT2, "fake-cuda")
    check("bf16 gpt2 -> flash", diag["sdpa_kernels"] == {"flash": 4}, str(diag))
    check("no attention mask materialised for sdpa", not diag["sdpa_masked_calls"], str(diag))

    # foreach AdamW: step-2 optimizer phase holds params + grads + 2 states + one param-sized temp.
    res, _ = runner.measure_case(_case("t", "tiny-llama", micro_batch=1, seq_len=8), TINY_LLAMA, "fake-cuda")
    pb = res["parameters"]["bytes"]
    opt_peak = res["phase_peaks"]["step2"]["optimizer"]
    check(
        "foreach AdamW optimizer-phase peak ~ 5x params (p, g, m, v, temp)",
        abs(opt_peak / pb - 5.0) < 0.1,
        f"(ratio {opt_peak / pb:.3f})",
    )

    # SiLU's backward is one op on fake CUDA, as on a GPU (runner._register_missing_cuda_kernels), not its composite.
    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), runner.fake_cuda_environment():
        x = torch.randn(4, 8, device="cuda", requires_grad=True)
        y = torch.nn.functional.silu(x)
        ops = Ops()
        with ops:
            y.sum().backward()
    check(
        "SiLU backward: one silu_backward, no sigmoid",
        "silu_backward.default" in ops.names and not any(n.startswith("sigmoid") for n in ops.names),
        str([n for n in ops.names if not n.startswith("device")]),
    )

    # One rank of FSDP2 / DDP on fake CUDA (fake process group).
    from . import parallel

    world = 3
    fsdp_case = _case("t", "tiny-llama", strategy="fsdp", world_size=world)
    res, _ = parallel.measure_parallel_case(fsdp_case, TINY_LLAMA, "fake-cuda")
    m = runner._build(_case("t", "tiny-llama"), TINY_LLAMA, fake=False)
    # FSDP2 shards every parameter on dim 0 into world chunks padded to ceil(dim0 / world) rows.
    expect = sum(-(-p.shape[0] // world) * (p.numel() // p.shape[0]) * p.element_size() for p in m.parameters())
    check(
        "FSDP2 rank holds ceil(dim0/world)-row shards of every parameter",
        res["rank_parameters"]["bytes"] == expect,
        f"({res['rank_parameters']['bytes']} vs {expect})",
    )
    check(
        "FSDP2 units: one per decoder layer + root",
        [u["module"] for u in res["fsdp_units"]] == ["<root>", "model.layers.0", "model.layers.1"],
        str([u["module"] for u in res["fsdp_units"]]),
    )
    res, _ = parallel.measure_parallel_case(
        _case("t", "tiny-llama", strategy="ddp", world_size=4, bucket_cap_mb=0.05), TINY_LLAMA, "fake-cuda"
    )
    n = sum(p.numel() for p in m.parameters())
    b1, b2 = res["ddp_buckets"]["step1"], res["ddp_buckets"]["step2"]
    check("DDP step 1: one bucket of every gradient (find_unused_parameters=False)", [x[0] for x in b1] == [n], str(b1))
    check(
        "DDP step 2: rebuilt buckets cover every gradient once",
        sum(x[0] for x in b2) == n and len(b2) > 1,
        f"({len(b2)} buckets, {sum(x[0] for x in b2)} of {n})",
    )
    check(
        "DDP buckets held at the peak = gradient bytes (rounded per bucket)",
        res["breakdown_at_peak"]["ddp_buckets"] >= 4 * n,
        str(res["breakdown_at_peak"]),
    )
    return ok_all


# --------------------------------------------------------------------------- part 4
def _untracked_phase_peaks(case: dict[str, Any], cfg: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The case's two steps on real CPU tensors, counted without any module hook: every storage an op returns,
    from that op until Python frees it, plus the parameters, buffers and input ids held before the steps."""
    import contextlib
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    from . import runner

    class Untracked(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live = 0
            self.seen: set[int] = set()
            self.step, self.phase = 0, ""
            self.phase_peaks: dict[str, dict[str, int]] = {}

        def add(self, t: torch.Tensor) -> None:
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self.seen or not storage.nbytes():
                return
            self.seen.add(key)
            self.live += storage.nbytes()
            weakref.finalize(storage, self._free, key, storage.nbytes())

        def _free(self, key: int, size: int) -> None:
            self.seen.discard(key)
            self.live -= size

        def _mark(self) -> None:
            if self.step:
                pp = self.phase_peaks.setdefault(f"step{self.step}", {})
                pp[self.phase] = max(pp.get(self.phase, 0), self.live)

        def set_phase(self, step: int, phase: str) -> None:
            self.step, self.phase = step, phase
            self.phase_peaks.setdefault(f"step{step}", {})[phase] = self.live

        def reset_mod_stats(self) -> None:
            pass

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.add(t)
            self._mark()
            return out

    with contextlib.ExitStack() as stack:
        fake, device = runner._enter_backend(stack, "cpu")
        model = runner.prepared_model(case, cfg, fake, device)
        opt = runner._make_optimizer(case, [p for p in model.parameters() if p.requires_grad], device)
        ids = runner._token_ids(int(case["micro_batch"]), int(case["seq_len"]), int(cfg["vocab_size"]), device, fake)
        counter = Untracked()
        for t in (*model.parameters(), *model.buffers(), ids):
            counter.add(t)
        knobs = runner.resolve_knobs(case)
        runner._train_steps(model, opt, ids, counter, knobs, device, fake, "cpu", runner._CudaMarks("cpu"))
        return counter.phase_peaks


def part4() -> bool:
    from . import runner

    ok_all = True
    for case, cfg in CHECKPOINTED:
        t = time.perf_counter()
        untracked = _untracked_phase_peaks(case, cfg)
        tracked, _ = runner.measure_case(case, cfg, "cpu")
        step_tracker = runner.use_step_mod_tracker
        runner.use_step_mod_tracker = lambda tracker: None  # torch's own ModTracker, for comparison
        try:
            stock, _ = runner.measure_case(case, cfg, "cpu")
        finally:
            runner.use_step_mod_tracker = step_tracker
        ok = tracked["phase_peaks"] == untracked
        ok_all &= ok
        kept = {
            f"{s}.{p}": stock["phase_peaks"][s][p] - v
            for s, phases in untracked.items()
            for p, v in phases.items()
            if stock["phase_peaks"][s][p] != v
        }
        print(
            f"{'PASS' if ok else 'FAIL'} {case['id']}: tracked = untracked per phase "
            f"(step 2 backward {untracked['step2']['backward']:,} B); torch's stock ModTracker kept "
            f"{kept or 'nothing'} more [{time.perf_counter() - t:.1f}s]",
            flush=True,
        )
        if not ok:
            print(f"   tracked={json.dumps(tracked['phase_peaks'])}\n   untracked={json.dumps(untracked)}")
    return ok_all


def main() -> int:
    if "--part2" in sys.argv:
        return 0 if part2() else 1
    if "--part4" in sys.argv:
        return 0 if part4() else 1
    t = time.perf_counter()
    print("== parts 1 and 3: real CPU vs FakeTensorMode CPU (same tracker; 3: a DDP / FSDP2 rank) ==", flush=True)
    ok1 = part1()
    print("== part 2: fake-cuda behaviour ==", flush=True)
    ok2 = subprocess.run([sys.executable, "-m", "tools.measure.selfcheck", "--part2"]).returncode == 0
    print("== part 4: tracked vs untracked, checkpointed steps on real CPU tensors ==", flush=True)
    ok4 = part4()
    ok = ok1 and ok2 and ok4
    print(f"selfcheck {'PASSED' if ok else 'FAILED'} in {time.perf_counter() - t:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
