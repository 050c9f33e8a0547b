"""Serving memory as the chosen engine lays it out: weights, KV cache, and what fits."""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from core.breakdown import BucketKey
from core.estimate import Estimate
from core.plan import ENGINE_LABELS, Engine
from core.runtime import runtime_names
from core.verdict import VERDICT_LABELS, Mode
from gui.format import Unit, counted, memory
from gui.panels.figures import FiguresPanel
from gui.panels.verdict import VERDICT_STYLE, margin_text

ROWS = (
    ("engine", "Engine", "How the engine spends the card: a static batch (generate) or a paged pool (vLLM)."),
    ("gpus", "GPUs", "Tensor parallel × pipeline parallel × replicas."),
    ("weights", "Weights per GPU", "The weights one GPU holds: split by tensor and pipeline parallel."),
    (
        "kv_cache",
        "KV cache",
        "What the verdict counts of the KV cache: generate's batch at its longest; vLLM's and SGLang's running "
        "requests' blocks (the pool they allocate at start-up is its own row, below 'Needed at once').",
    ),
    ("kv_tokens", "KV cache tokens", "vLLM's 'GPU KV cache size'; for generate, requests × context."),
    (
        "kv_per_token",
        "KV per token",
        "2 · layers · KV heads per GPU · head width · bytes; vLLM's int8 / int4 caches add a float32 scale per head.",
    ),
    ("activations", "Activations", "generate: prefill working memory; vLLM: the peak of its profiling forward."),
    ("non_torch", "Outside torch", "vLLM: what its profiling run adds outside PyTorch (NCCL at TP > 1)."),
    (
        "host",
        "Host memory",
        "llama.cpp: the token embeddings, the layers not offloaded to the GPU and their KV cache, in host RAM.",
    ),
    (
        "overhead",
        "CUDA context",
        "The process's runtime beside the engine's buffers: its CUDA context (on a Mac, Metal's device).",
    ),
    ("total", "Needed at once", "What the requests running together hold: the figure the verdict judges."),
    (
        "footprint",
        "Held on the card",
        "generate: peak + context; vLLM: card × gpu_memory_utilization + context + CUDA graphs. "
        "The verdict judges 'Needed at once', not this.",
    ),
    ("concurrency", "Concurrency", "Requests of this context served at once."),
    ("scheduler", "Scheduler", "vLLM's max_num_seqs and max_num_batched_tokens (its defaults for the card)."),
    (
        "max_context",
        "Longest context",
        "Longest context each request may have at this concurrency, within the model's context window.",
    ),
)


class InferencePanel(FiguresPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Serving", ROWS, "Serving formula", parent, headline_name="Serving verdict")
        self.unit: Unit = "GB"
        for key in ("gpus", "kv_cache", "concurrency", "scheduler", "footprint"):
            self.values[key].setWordWrap(True)  # long card names never widen the window
        # Under "Needed at once", across the panel: the figure beside it that is not it, named and worded by core
        # (InferenceEstimate.apart) as the command line prints it on a line of its own (commit 2753058).
        apart = self.values["apart"] = QLabel()
        apart.setAccessibleName("Not judged")
        apart.setWordWrap(True)
        apart.setTextFormat(Qt.TextFormat.PlainText)
        apart.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        position: Any = self.form.getWidgetPosition(self.values["total"])  # (row, role); typed as object
        self.form.insertRow(int(position[0]) + 1, apart)

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        self.refresh()

    def _show(self, estimate: Estimate) -> None:
        inf = estimate.inference
        u = self.unit
        plan = estimate.plan.inference
        vllm = inf.engine is Engine.VLLM
        pooled = inf.pooled  # they size a pool at start-up
        v = self.values
        v["engine"].setText(ENGINE_LABELS[inf.engine])
        split = (
            f" (TP {plan.tensor_parallel} · PP {plan.pipeline_parallel} · {plan.replicas} replica"
            f"{'s' if plan.replicas > 1 else ''})"
            if inf.gpus > 1
            else ""
        )
        v["gpus"].setText(f"{inf.gpus} × {estimate.gpu.name}{split}")
        v["weights"].setText(_weights(estimate, u))
        kv = next((b.bytes for b in inf.buckets if b.key is BucketKey.KV_CACHE), inf.kv_cache_bytes)
        v["kv_cache"].setText(memory(kv, u) + (f" ({inf.kv_held})" if inf.kv_held else ""))
        v["kv_tokens"].setText(f"{inf.kv_cache_tokens:,} tokens")
        # bytes as every other row and the command line give them ("131,072 B", "2.62 MB"): it read "131,072 bytes"
        v["kv_per_token"].setText(memory(inf.kv_bytes_per_token, u))
        v["activations"].setText(memory(inf.activation_bytes, u))
        llamacpp = inf.engine is Engine.LLAMACPP
        # A row the engine has no such figure for is hidden, not shown as "— (vLLM only)".
        for key, applies in (("non_torch", vllm), ("host", llamacpp), ("scheduler", vllm)):
            self.form.setRowVisible(v[key], applies)
        v["non_torch"].setText(memory(inf.non_torch_bytes, u) if vllm else "")
        v["host"].setText(_host(estimate, u) if llamacpp else "")
        v["overhead"].setText(memory(inf.overhead_bytes, u))
        # The row is named as the engine names it: "CUDA context", or on a Mac llama.cpp's "Metal device". vLLM's
        # overhead bucket holds its non-torch memory (the row above), not the context this row shows: the row read
        # "non-torch memory: 0.54 GB" under "Outside torch: 0.31 GB". There, and where the bucket names nothing
        # (SGLang), the row takes the card's runtime's name (core.runtime.runtime_names: "HIP context" on ROCm).
        overhead = next((b for b in inf.buckets if b.key is BucketKey.OVERHEAD and b.terms), None)
        label = self.form.labelForField(v["overhead"])
        if isinstance(label, QLabel):
            runtime = overhead.terms[0].label if overhead and not vllm else runtime_names(estimate.gpu.id).context
            label.setText(runtime + ":")
        _show_apart(self.values["apart"], estimate, u)
        v["total"].setText(f"<b>{memory(inf.total_bytes, u)}</b>")
        note = inf.held_note(u)  # why it may exceed the judged figure and the usable line
        v["footprint"].setText(memory(inf.footprint_bytes, u) + (f"<br><small>{escape(note)}</small>" if note else ""))
        if pooled:
            v["concurrency"].setText(f"{inf.max_concurrency:.2f}× for {plan.context:,} tokens per request")
        else:
            v["concurrency"].setText(
                # the banner's words (InferenceEstimate.limits_sentence): "at most 63 × 4,096 tokens" beside it
                f"at most {counted(inf.max_concurrent, 'request')} of {plan.context:,} tokens at once"
                if inf.max_concurrent
                else f"none: {inf.none_served}"
            )
        v["scheduler"].setText(
            f"{inf.max_num_seqs:,} sequences, {inf.max_num_batched_tokens:,} tokens per step" if vllm else ""
        )
        # "(the model's limit)" where the banner says it (InferenceEstimate.limits_sentence)
        limit = " (the model's limit)" if inf.at_model_limit(estimate.plan) else ""
        v["max_context"].setText(f"{inf.max_context:,} tokens{limit}" if inf.max_context else "none")
        assert self.headline is not None
        self.headline.setText(_headline(estimate, u))
        self.formula.setText(inf.formula)


# What each engine's figure apart is, on hover: the pool a pooled engine takes, llama.cpp's buffers, torch's peak.
PEAK_TOOLTIP = "What torch.cuda.max_memory_allocated would report on one GPU."
BUFFERS_TOOLTIP = "llama.cpp: the model, KV cache and compute buffers it allocates on one GPU when it loads."
POOL_TOOLTIP = "The engine takes its whole KV cache pool at start-up, however few requests run: not what is judged."


def _show_apart(label: QLabel, estimate: Estimate, u: Unit) -> None:
    """The figure beside "Needed at once" that is not it, in core's words (InferenceEstimate.apart), as the
    command line prints it: vLLM's and SGLang's pool, llama.cpp's buffers, or torch's allocator peak."""
    inf = estimate.inference
    name, text = inf.apart(u)
    label.setText(f"{name}: {text}")
    label.setToolTip(POOL_TOOLTIP if inf.pooled else BUFFERS_TOOLTIP if inf.engine is Engine.LLAMACPP else PEAK_TOOLTIP)


def _weights(estimate: Estimate, u: Unit) -> str:
    """The weights bucket the chart draws; what it holds beside the stored weights (a GPTQ model's
    dequantisation buffer under transformers) named with its size."""
    inf = estimate.inference
    bucket = next((b for b in inf.buckets if b.key is BucketKey.WEIGHTS), None)
    if bucket is None or len(bucket.terms) < 2:
        return memory(inf.weights_bytes, u)
    extra = ", ".join(f"{memory(t.bytes, u)} {t.label}" for t in bucket.terms[1:])
    return f"{memory(bucket.bytes, u)}, of which {extra}"


def _headline(estimate: Estimate, u: Unit) -> str:
    inf = estimate.inference
    plan = estimate.plan.inference
    if inf.engine in (Engine.VLLM, Engine.SGLANG):
        name = ENGINE_LABELS[inf.engine]
        if inf.would_not_start:  # never "✔ holds" (h90start): the checks that refuse it, then the banner's words
            causes = inf.start_cause_words  # core's, the Diagnosis's cause (h93diag2: its own words)
            margin = margin_text(estimate.judgement(Mode.INFERENCE), estimate.plan.hardware.headroom, u)
            return f"<b>✖ {name} would not start</b>: {escape(causes)} — {escape(margin)}."
        if inf.max_concurrency < 1:  # no refusal: SGLang starts and caps a request at its pool (h88fix), and vLLM's
            # weights past the free memory run CUDA out before any check (core.serving.engines.vllm_no_blocks_refusal)
            return (
                f"<b>✖ {name} holds {inf.kv_cache_tokens:,} tokens of KV cache</b>: no request of {plan.context:,} "
                "tokens fits."
            )
        queue = f"; {inf.queued:,} of the {plan.concurrent:,} requests wait in the queue" if inf.queued else ""
        return (
            f"<b>{'✔' if inf.fits else '▲'} {name} holds {inf.kv_cache_tokens:,} tokens of KV cache</b>: "
            f"{counted(min(inf.max_concurrent, plan.concurrent), 'request')} of {plan.context:,} tokens at once{queue}."
        )
    # The core's serving verdict, three states as for training (core.verdict.judge).
    verdict = f"{VERDICT_STYLE[inf.verdict][0]} {VERDICT_LABELS[inf.verdict].lower()}"
    host = f"; host memory {_host(estimate, u)}" if inf.engine is Engine.LLAMACPP else ""
    return (
        f"<b>{verdict}</b>: {counted(plan.concurrent, 'request')} of {plan.context:,} tokens "
        f"{'needs' if plan.concurrent == 1 else 'need'} "
        f"{memory(inf.total_bytes, u)} of {memory(inf.budget_bytes, u)} usable{host}."
    )


def _host(estimate: Estimate, u: Unit) -> str:
    inf = estimate.inference
    ram = f" of {memory(inf.host_ram_bytes, u)} RAM" if inf.host_ram_bytes else " (host RAM not given)"
    return memory(inf.host_bytes, u) + ram + (" — too much" if inf.host_ram_short else "")
