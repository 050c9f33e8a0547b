"""One answer everywhere, swept over the plans people build now: every method, each precision preset,
QLoRA's bases, checkpointing on and off, one GPU, DDP over 2 and FSDP over 8, plans that fit, sit in the
headroom, are borderline or run out of memory. Each plan is set in the window, saved from it, and read
back by the command line (``estimate --json`` and its text), ``report --md``, ``compare --json`` and a
launch exporter; every surface must state the figures the others state (no figure is written here:
the surfaces are compared with each other)."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.cli.app import main
from core.cli.render import estimate_json_text
from core.dtypes import Quant
from core.errors import PlanError
from core.estimate import estimate
from core.files.planfile import load
from core.format import memory
from core.inputs import Engine, Method, Preset, Strategy, input_at
from core.model import spelled_targets
from core.plan import Plan
from core.presets import plan_for_model
from core.verdict import Mode, Verdict, verdict_label
from gui.main_window import MainWindow


def _plan(model: str, gpu: str, method: Method, **inputs: Any) -> Plan:
    plan = plan_for_model(model).with_input("method", method)
    for path, value in inputs.items():
        plan = plan.with_input(path.replace("__", "."), value)
    return plan.with_input("hardware.gpu", gpu)


# The sweep's groups, each a list of (name, plan). Cards are picked so that each verdict occurs
# (test_each_verdict_occurs checks it, so a moved estimate that loses one asks for new cards).
def _methods() -> list[tuple[str, Plan]]:
    return [(m.value, _plan("llama-3.2-3b", "l40s", m)) for m in Method]


def _presets() -> list[tuple[str, Plan]]:
    return [
        (f"{m.value}-{p.value}", _plan("llama-3.2-3b", "rtx-4090", m, preset=p))
        for p in Preset
        if p is not Preset.CUSTOM
        for m in (Method.FULL, Method.LORA, Method.OFT)
    ]


def _quantised() -> list[tuple[str, Plan]]:
    return [
        (f"{q.value}-ckpt-{c}", _plan("llama-3.1-8b", "rtx-3060-12gb", Method.QLORA, quant=q, checkpointing=c))
        for q in Quant
        for c in (False, True)
    ]


def _checkpointing() -> list[tuple[str, Plan]]:
    methods = (Method.FULL, Method.LORA, Method.DORA, Method.LOHA, Method.LOKR, Method.VERA, Method.OFT, Method.IA3)
    return [
        (f"{m.value}-ckpt-{c}", _plan("llama-3.1-8b", "rtx-4090", m, checkpointing=c))
        for m in methods
        for c in (False, True)
    ]


def _layouts() -> list[tuple[str, Plan]]:
    plans = []
    for m in (Method.FULL, Method.LORA, Method.QLORA, Method.DORA, Method.IA3, Method.OFT, Method.VERA, Method.LOHA):
        for gpus, strategy in ((2, Strategy.DDP), (8, Strategy.FSDP)):
            try:
                plan = _plan("llama-3.1-8b", "rtx-4090", m, parallel__gpus_per_node=gpus, parallel__strategy=strategy)
            except PlanError as refused:  # refused with the reason: the method and the layout named
                assert strategy.value in str(refused) and "one GPU or DDP" in str(refused), refused
                continue
            plans.append((f"{m.value}-{strategy.value}-{gpus}", plan))
    return plans


def _verdicts() -> list[tuple[str, Plan]]:
    return [
        ("fits", _plan("llama-3.2-3b", "a100-80gb-sxm", Method.FULL)),
        ("over-headroom", _plan("llama-3.2-3b", "rtx-4090", Method.ADAPTER)),
        ("borderline", _plan("llama-3.2-3b", "rtx-4090", Method.LORA)),
        ("oom", _plan("llama-3.2-3b", "rtx-3060-12gb", Method.FULL)),
    ]


def _settings() -> list[tuple[str, Plan]]:
    """Each method's own settings away from their defaults, through the plan file and back."""
    on = ("llama-3.2-3b", "rtx-4090")
    return [
        ("oft-by-rank", _plan(*on, Method.OFT, lora__oft_block_size=0, lora__rank=4)),
        ("oft-blocks-64", _plan(*on, Method.OFT, lora__oft_block_size=64)),
        ("lokr-factor-4", _plan(*on, Method.LOKR, lora__lokr_factor=4, lora__rank=16)),
        ("vera-128", _plan(*on, Method.VERA, lora__rank=128)),
        ("loha-all-linear", _plan(*on, Method.LOHA, lora__targets=("all-linear",))),
        (
            "ia3-attention-only",
            _plan(*on, Method.IA3, lora__ia3_feedforward=()).with_input("lora.targets", ("k_proj", "v_proj")),
        ),
        ("prompt-50", _plan(*on, Method.PROMPT_TUNING, lora__virtual_tokens=50)),
        ("adapter-nf4", _plan(*on, Method.ADAPTER, lora__adapter_quantised=True, lora__adapter_start_layer=4)),
        ("lora-head", _plan(*on, Method.LORA, lora__targets=("q_proj", "v_proj", "lm_head"), lora__rank=64)),
        ("frozen-20", _plan(*on, Method.FROZEN, frozen_layers=20)),
    ]


GROUPS: dict[str, Callable[[], list[tuple[str, Plan]]]] = {
    "settings": _settings,
    "methods": _methods,
    "presets": _presets,
    "quantised": _quantised,
    "checkpointing": _checkpointing,
    "layouts": _layouts,
    "verdicts": _verdicts,
}
# The settings a method may have: the window's row of each, and the text the comparison's adapter row
# gives it (core.advice.compare).
# FourierFT's n_frequency rides on the rank field and reads "n=" (core.advice.compare, branch h76peft).
ADAPTER_ROWS = {
    "lora.rank": ("r=", "n="),
    "lora.alpha": ("α=",),
    "lora.virtual_tokens": ("virtual tokens",),
    "lora.lokr_factor": ("factor ",),
}
# Methods a launch exporter writes as themselves; any other must be named among what it cannot express.
WRITTEN_AS_ITSELF = {Method.FULL, Method.LORA, Method.QLORA, Method.DORA}


def _label(doc: dict[str, Any]) -> str:
    """The label every view gives the command line's --json answer: "Fits narrowly" where it fits but its range
    passes the usable memory (core.verdict.Judgement.label)."""
    verdict = Verdict(doc["verdict"])
    return verdict_label(verdict, verdict is Verdict.FITS and not doc["judgement"]["fits_with_margin"])


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(list(args))
    assert code in (0, None), (args, err.getvalue())
    return out.getvalue() + err.getvalue()


def _window_surface(window: MainWindow, plan: Plan) -> dict[str, Any]:
    window.controller.reset(plan)
    window.settle_banner()
    panel = window.verdict
    head = re.sub("<[^>]+>", "", panel.headline.text())
    detail = re.sub("<[^>]+>", "", panel.detail.text())
    window.tabs.setCurrentWidget(window.arithmetic)
    picker = window.arithmetic.picker
    buckets = [picker.itemText(i).split(" — ") for i in range(picker.count())]
    summary = window.arithmetic.summary.text()
    window.tabs.setCurrentWidget(window.compute_panel)
    # Compute & time: the hours, the speed and the MFU the command line's compute lines give.
    compute = [window.compute_panel.training.values[key].text() for key in ("hours", "tokens_per_second", "mfu")]
    form = window.method_form
    return {
        "verdict": panel.badge.text(),
        "headline": head,
        "range": re.search(r"range (\S+ \S+)–(\S+ \S+)", detail).groups(),  # type: ignore[union-attr]
        "buckets": buckets,
        "summary": summary,
        "rows": {path: form.form.isRowVisible(form.fields[path]) for path in ADAPTER_ROWS},
        "targets": form.form.isRowVisible(form.targets),
        "compute": compute,
    }


def _check(window: MainWindow, name: str, plan: Plan, folder: Path) -> list[str]:
    """Every disagreement between the surfaces for this plan, in words."""
    wrong: list[str] = []
    seen = _window_surface(window, plan)
    path = folder / f"{name}.json"
    assert window.document.write(str(path))
    if load(str(path)) != plan:  # saved from the window, loaded by the command line
        wrong.append("the plan file saved from the window loads as another plan")
    doc = json.loads(_cli("estimate", "--plan", str(path), "--json"))
    text = _cli("estimate", "--plan", str(path))
    md_path = folder / f"{name}.md"
    _cli("report", str(path), "--md", str(md_path), "--force")
    md = md_path.read_text()
    label = _label(doc)
    loaded = load(str(path))
    if doc["method"] != loaded.method.value or text.splitlines()[0].split(" · ")[1:3] != [
        loaded.method.value,
        loaded.precision_word,
    ]:
        wrong.append(f"CLI names {doc['method']} / {text.splitlines()[0]!r} for {loaded.method} {loaded.preset}")
    total, usable, capacity = (memory(doc[k]) for k in ("total_bytes", "usable_bytes", "capacity_bytes"))
    low, high = (memory(b) for b in doc["range_bytes"])
    margin = memory(doc["margin_bytes"])
    if label not in seen["verdict"]:
        wrong.append(f"window badge {seen['verdict']!r}, CLI {label}")
    if not seen["headline"].startswith(f"{total} of {usable} usable"):
        wrong.append(f"window headline {seen['headline']!r}, CLI {total} of {usable}")
    if doc["verdict"] != Verdict.BORDERLINE and memory(abs(doc["margin_bytes"])) not in seen["headline"]:
        wrong.append(f"window headline {seen['headline']!r}, CLI margin {margin}")
    if seen["range"] != (low, high):
        wrong.append(f"window range {seen['range']}, CLI {low}–{high}")
    judged = f"{label}: {total} of {capacity} ({usable} usable"
    for surface, body in (("text", text), ("report", md)):
        if judged not in body or f"margin {margin}" not in body:
            wrong.append(f"{surface} lacks {judged!r} / margin {margin}")
    if f"range {low} – {high}" not in text or f"| Range from | {low} |" not in md or f"| Range to | {high} |" not in md:
        wrong.append(f"text or report lacks the range {low} – {high}")
    if seen["summary"] not in text or f"`{seen['summary']}`" not in md:
        wrong.append(f"window arithmetic {seen['summary']!r} not in the text or report")
    spent, speed, mfu = seen["compute"]
    if f", {spent} on " not in text or f", {speed.split(' · ')[0]}, " not in text or f"MFU      {mfu} " not in text:
        wrong.append(f"window compute {seen['compute']} not in the text's compute lines")
    if f"MFU {mfu}" not in md:  # h88fix: the report words the MFU as the window and the command line do
        wrong.append(f"window MFU {mfu!r} not in the report")
    for bucket, size in seen["buckets"]:
        if f"| {bucket} | {size} |" not in md:
            wrong.append(f"window bucket {bucket} {size} not in the report")
    row = re.search(r"\| (?:Adapter|LoRA) \| (.*) \|", md)  # the row's label is core/tests' to check
    adapter = row.group(1) if row else "(no adapter row)"
    for input_path, marks in ADAPTER_ROWS.items():
        if seen["rows"][input_path] != any(mark in adapter for mark in marks):
            wrong.append(f"window shows {input_path}: {seen['rows'][input_path]}, report's adapter row {adapter!r}")
    # all-linear is shown as itself, not as the seven names it covers (core.model.spelled_targets).
    if seen["targets"] != (", ".join(spelled_targets(plan.lora.targets)).replace("_", r"\_") in adapter):
        wrong.append(f"window shows the targets: {seen['targets']}, report's adapter row {adapter!r}")
    return wrong


def _compare_and_export(plans: list[tuple[str, Plan]], folder: Path) -> list[str]:
    """compare --json over the group, four plans at a time, against each plan's estimate --json; one launch
    exporter per plan writes the plan's method or names it among what it cannot express."""
    wrong: list[str] = []
    for start in range(0, len(plans), 4):
        chunk = plans[start : start + 4]
        paths = [str(folder / f"{name}.json") for name, _ in chunk]
        rows = {row["key"]: row["values"] for row in json.loads(_cli("compare", *paths, "--json"))["rows"]}
        for at, (name, _) in enumerate(chunk):
            doc = json.loads(_cli("estimate", "--plan", paths[at], "--json"))
            if rows["verdict"][at] != _label(doc):
                wrong.append(f"{name}: compare verdict {rows['verdict'][at]}, estimate {doc['verdict']}")
            keys = ("total", "range.low", "range.high", "capacity", "usable", "margin")
            figures = tuple(rows[key][at] for key in keys)
            stated = [doc["total_bytes"], *doc["range_bytes"], doc["capacity_bytes"], doc["usable_bytes"]]
            if [round(f) for f in figures] != [*stated, doc["margin_bytes"]]:
                wrong.append(f"{name}: compare {figures}, estimate {doc['total_bytes']} {doc['range_bytes']}")
    for name, plan in plans:
        said = _cli("export", "--plan", str(folder / f"{name}.json"), "--to", "trl")
        if plan.method not in WRITTEN_AS_ITSELF and "method.kind" not in said:
            wrong.append(f"{name}: the TRL export writes LoRA for {plan.method.value} without saying so")
    return wrong


@pytest.mark.parametrize("group", GROUPS)
def test_every_surface_states_the_same_figures(group: str, window: MainWindow, tmp_path: Path, qtbot: Any) -> None:
    plans = GROUPS[group]()
    assert plans
    window.show()  # the Details tabs draw when shown (each read below with its tab in front)
    qtbot.waitExposed(window)
    wrong = [f"{name}: {w}" for name, plan in plans for w in _check(window, name, plan, tmp_path)]
    wrong += _compare_and_export(plans, tmp_path)
    window.controller.undo_stack.setClean()
    assert not wrong, "\n".join(wrong)


def test_each_verdict_occurs_and_json_keys_are_typed_alike() -> None:
    """The sweep meets every verdict, and ``estimate --json`` has the same keys, typed alike, for every
    method (the evidence groups under confidence are keyed by the plan's own groups; a cost is null where
    no price is known)."""

    def shape(value: Any, at: str = "") -> set[tuple[str, str]]:
        if isinstance(value, dict) and not at.endswith(("validated", "never_validated")):
            return set().union(*(shape(v, f"{at}.{k}") for k, v in value.items()))
        return {(at, type(value).__name__)}

    verdicts = {estimate(plan).judgement(Mode.TRAINING).verdict for group in GROUPS.values() for _, plan in group()}
    # WONT_START is serving's alone (an engine refusing the context: tests/core/test_one_answer_would_not_start.py)
    assert verdicts == set(Verdict) - {Verdict.WONT_START}
    shapes = {m: shape(json.loads(estimate_json_text(estimate(_plan("llama-3.2-3b", "l40s", m))))) for m in Method}
    first = shapes[Method.FULL]
    for method, seen in shapes.items():
        assert seen == first, (method, seen ^ first)


def test_the_rank_field_is_named_for_what_it_counts(window: MainWindow) -> None:
    """OFT's r counts blocks per target (huggingface/peft 51c2ff66 src/peft/tuners/oft/config.py OFTConfig.r:
    "the number of OFT blocks per injected layer"), as the report's "r=4 blocks" says; the field beside it
    read "Rank r" as for LoRA."""
    label = window.method_form.labels["lora.rank"]
    oft = _plan("llama-3.2-3b", "l40s", Method.OFT, lora__oft_block_size=0)
    window.controller.reset(oft)
    assert label.text() == input_at("lora.rank").label_in(oft) + ":" == "Blocks r:"
    window.controller.reset(oft.with_input("method", Method.LORA))
    assert label.text() == "Rank r:"


def _served() -> list[tuple[str, Plan]]:
    """LoRA whose training step fits an A100 80GB, served by each engine within and past the model's limit (Llama 2
    7B's 4,096 and Llama 3.1 8B's 131,072: their config.json max_position_embeddings), at 1 and 64 requests: serving
    fits, does not fit, or would not start (vLLM / SGLang past the limit; vLLM's pool short of one request)."""
    plans = []
    for model, limit in (("llama-2-7b", 4096), ("llama-3.1-8b", 131_072)):
        for engine in (Engine.VLLM, Engine.SGLANG, Engine.HF, Engine.LLAMACPP):
            for context, concurrent in ((limit, 64), (2 * limit, 1)):
                plan = _plan(model, "a100-80gb-sxm", Method.LORA).with_input("checkpointing", True)
                served = plan.with_inference(engine=engine, context=context, concurrent=concurrent)
                plans.append((f"{model}-{engine.value}-{context}x{concurrent}", served))
    return plans


def test_the_diagnosis_tab_says_servings_own_verdict(window: MainWindow, qtbot: Any) -> None:
    """h91diag: the Diagnosis tab said "Nothing fails: the training step, evaluation and serving all fit." beside a
    serving estimate that would not start. Over these plans its sentence is checked against est.inference itself:
    "Nothing fails" only where serving fits, the engine's refusal in its words where it would not start, serving's
    verdict where it does not fit; and it is core's Diagnosis.outcome, word for word."""
    from core.advice.diagnosis import diagnose

    window.show()
    qtbot.waitExposed(window)
    panel = window.diagnosis
    window.tabs.setCurrentWidget(panel)
    wrong: list[str] = []
    cases: set[str] = set()
    for name, plan in _served():
        window.controller.reset(plan)
        ready = lambda p=plan: panel.diagnosis is not None and panel.diagnosis.estimate.plan == p
        qtbot.waitUntil(ready, timeout=20000)
        shown = html.unescape(re.sub("<[^>]+>", "", panel.failure.text().replace("<br>", " ")))
        est = estimate(plan)
        inf, serving, step = est.inference, est.judgement(Mode.INFERENCE), est.judgement(Mode.TRAINING)
        if not step.fits:
            wrong.append(f"{name}: the training step does not fit ({step.label}): pick another card")
            continue
        if shown != diagnose(plan).outcome.text:
            wrong.append(f"{name}: the tab says {shown!r}, core {diagnose(plan).outcome.text!r}")
        if inf.would_not_start:
            cases.add("would not start")
            if not shown.startswith("Fails when the serving engine starts") or inf.would_not_start not in shown:
                wrong.append(f"{name}: serving would not start ({inf.would_not_start[:60]}…), the tab: {shown!r}")
        elif not serving.fits:
            cases.add("does not fit")
            if f"serving's verdict is {serving.label}" not in shown:
                wrong.append(f"{name}: serving {serving.label}, the tab: {shown!r}")
        else:
            cases.add("fits")
            if not shown.startswith("Nothing fails"):
                wrong.append(f"{name}: serving fits, the tab: {shown!r}")
    window.controller.undo_stack.setClean()
    assert not wrong, "\n".join(wrong)
    assert cases == {"would not start", "does not fit", "fits"}  # each answer is met
