"""The ``python -m sglang.launch_server`` command for the plan's serving settings.

Flags read in the released wheels on PyPI (``pip download sglang==X --no-deps``; no wheel records
the commit it was built from: 0.4.x has no ``_version.py``, 0.5.23's has ``commit_id = None``), in
``sglang/srt/server_args.py`` (``ServerArgs.add_cli_args``) up to 0.5.10 and, in 0.5.19 and
0.5.23, the dataclass fields that ``sglang/srt/arg_groups/arg_utils.py``
``add_cli_args_from_dataclass`` turns into flags (0.5.23: ``arg_groups/fields/model.py``,
``parallel.py``, ``schedule.py``):

* ``--model-path`` (0.5.23 ``model_path``, alias ``--model``), ``--tp-size`` (alias
  ``--tensor-parallel-size`` in every release read), ``--dp-size`` (data-parallel replicas,
  alias ``--data-parallel-size``), ``--context-length`` and ``--mem-fraction-static``: 0.4.0 to
  0.5.23 alike.
* ``--pp-size``: from 0.4.7 (0.4.6's server_args.py has no pipeline parallelism).
* ``--dtype``: auto | half | float16 | bfloat16 | float | float32 in every release read.
* ``--kv-cache-dtype``: auto (the model's dtype) | fp8_e5m2 in 0.4.0; fp8_e4m3 by 0.4.5; bf16
  and fp4_e2m1 by 0.5.10. The planner's one-byte cache is written fp8_e5m2, the one choice
  every release has (e4m3 wants scaling factors, ``--quantization-param-path``).
* ``--quantization``: fp8 (in flight), awq, gptq (the checkpoint must be one), bitsandbytes in
  every release read; mxfp4 from 0.5.1 (0.4.10's choices lack it). An 8-bit GPTQ plan writes
  gptq_marlin (vLLM's name, which SGLang's choices carry beside gptq). Re-read in all 55 wheels of
  resources/engine_flags/sglang_server.txt (h88sgl): fp8, awq, gptq, gptq_marlin and bitsandbytes in every one, mxfp4
  from 0.5.1 (the ``--quantization`` choices: inline to 0.5.1.post3, ``QUANTIZATION_CHOICES`` in server_args.py
  0.5.2 - 0.5.19, in ``arg_groups/choices.py`` from 0.5.20); ``fp8_e5m2`` among ``--kv-cache-dtype``'s in every one.
* ``--context-length`` past the model's own: ``ModelConfig`` (``sglang/srt/configs/model_config.py``,
  0.4.0 ``__init__``, 0.5.23 ``_derive_context_length``) raises unless
  ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``, which is then written in front.

``--enable-multimodal`` (a switch, 0.4.6 on) is written where the plan asks for it and it changes the launch: Gemma 3
served with images (core.inputs.sglang_multimodal_opt_in); for any other model it does nothing, as its help says.
Where the plan leaves it off, the header says that this launch takes no images, in the words of the window
(core.serving.text_only.tower_line).

Every option is checked against the release's own wheel, the one the header's ``pip install sglang==X`` installs
(core.files.launch.engine_flags ``sglang_release_flags``), and so is the value of every option whose choices the
table records (``sglang_release_values``: ``--quantization mxfp4`` before 0.5.1, ``--kv-cache-dtype``, ``--dtype``):
one its parser has not, or refuses the value of, is left out and said among what the export cannot say, never
written for the server to stop on.

``--mem-fraction-static`` is always written for a plan judged under SGLang's rules: the plan's own
or the default the estimate took for the plan's release, card and layout
(:func:`core.serving.engines.sglang_flag_fraction`: the multimodal reduction of 0.4.9 on included, 0.4.0 - 0.4.8's
left to the server, which applies it to any fraction), so the server on another card keeps the fraction
that was judged. ``--chunked-prefill-size`` and ``--cuda-graph-max-bs`` are left to SGLang: its
card defaults are what the default fraction's reserve was worked out from
(:mod:`core.serving.sglang_versions`). How many requests arrive at once, and how long each answer
may be, are the clients' (``--max-running-requests`` stays SGLang's, sized from its pool).
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from core.context_limit import SGLANG_LONG_ENV, past_limit
from core.dtypes import KvDtype, WeightFormat
from core.errors import PlanError
from core.estimate import gpu_for
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    fraction_text,
    gptq_int8_header,
    header,
    model_reference,
)
from core.files.launch.engine_flags import sglang_release_flags, sglang_release_values
from core.files.launch.vllm import KV_DTYPES, compute_dtype, leave_out_refused
from core.inputs import SglangVersion, input_at, sglang_multimodal_asked
from core.plan import ENGINE_LABELS, Engine, Plan
from core.serving.engines import sglang_flag_fraction
from core.serving.sglang_versions import at_least
from core.serving.text_only import sglang_text_model, tower_line

FP8_KV: Final = "fp8_e5m2"  # --kv-cache-dtype choices of 0.4.0 (auto, fp8_e5m2) to 0.5.23
QUANTIZATION: Final = {
    WeightFormat.FP8: "fp8",
    WeightFormat.AWQ_INT4: "awq",
    WeightFormat.GPTQ_INT4: "gptq",
    # Marlin over a GPTQ checkpoint, 4 or 8 bits as its config says (GPTQMarlinConfig.get_name); the only name
    # that tells an 8-bit plan apart when read back
    WeightFormat.GPTQ_INT8: "gptq_marlin",
    WeightFormat.NF4: "bitsandbytes",
    WeightFormat.MXFP4: "mxfp4",
}
PP_FROM: Final = SglangVersion.V0_4_7  # --pp-size: 0.4.7 on (not in 0.4.6)
MIN_FRACTION: Final = input_at("inference.mem_fraction_static").low  # what a plan may give: 0.01
LONGER_CONTEXT_ENV: Final = SGLANG_LONG_ENV  # core.context_limit, the one home of the name
PIP_MARK: Final = "pip install sglang=="
# CUDA graphs off (inference.cuda_graphs): the spelling every release read takes (0.5.23 keeps it, deprecated,
# for --cuda-graph-backend-{decode,prefill}=disabled: sglang/srt/server_args.py).
DISABLE_CUDA_GRAPH: Final = "--disable-cuda-graph"
# inference.sglang_enable_multimodal: a store_true switch from 0.4.6 (server_args.py; 0.5.23 arg_groups/fields/mm.py
# enable_multimodal), written where it changes the plan (Gemma 3 on SGLang: core.inputs.sglang_multimodal_opt_in).
ENABLE_MULTIMODAL: Final = "--enable-multimodal"
SWITCHES: Final = (DISABLE_CUDA_GRAPH, ENABLE_MULTIMODAL)  # flags with no value: written last, read first
CLIENT_WHY: Final = "the clients' (requests at once, max_new_tokens per answer), not the server's"
# The plan field each written option carries, named where a release's parser has not the option.
FLAG_FIELDS: Final = {
    "--model-path": "model",
    "--dtype": "inference.weight_dtype",
    "--quantization": "inference.weight_dtype",
    "--kv-cache-dtype": "inference.kv_dtype",
    "--context-length": "inference.context",
    "--tp-size": "inference.tensor_parallel",
    "--pp-size": "inference.pipeline_parallel",
    "--dp-size": "inference.replicas",
    "--mem-fraction-static": "inference.mem_fraction_static",
    ENABLE_MULTIMODAL: "inference.sglang_enable_multimodal",
    DISABLE_CUDA_GRAPH: "inference.cuda_graphs",
}


def _weights(draft: Draft) -> list[str]:
    inf = draft.plan.inference
    fmt, kv = inf.weight_dtype, inf.kv_dtype
    dtype = compute_dtype(
        draft, "SGLang quantises in flight to fp8 or 4-bit bitsandbytes; its int8 (w8a8_int8) is a checkpoint's"
    )
    flags = ["--dtype", dtype]
    if fmt in QUANTIZATION:  # a name the release does not take (mxfp4 before 0.5.1): left out by leave_out_refused
        flags += ["--quantization", QUANTIZATION[fmt]]
    if kv is KvDtype.FP8:
        flags += ["--kv-cache-dtype", FP8_KV]
    elif kv not in KV_DTYPES:
        draft.cannot("inference.kv_dtype", "SGLang's quantised KV cache is fp8")
    elif KV_DTYPES[kv] != dtype:
        draft.cannot("inference.kv_dtype", f"SGLang keeps the KV cache in the model's dtype ({dtype}) or fp8")
    return flags


def _layout(draft: Draft, version: SglangVersion) -> list[str]:
    inf = draft.plan.inference
    flags = ["--tp-size", str(inf.tensor_parallel)]
    if inf.pipeline_parallel > 1:
        if at_least(version, PP_FROM):
            flags += ["--pp-size", str(inf.pipeline_parallel)]
        else:
            draft.cannot("inference.pipeline_parallel", f"SGLang {version.value} has no --pp-size (0.4.7 on)")
    if inf.replicas > 1:
        flags += ["--dp-size", str(inf.replicas)]
    return flags


def _fraction(draft: Draft) -> tuple[list[str], str]:
    """--mem-fraction-static as the estimate took it, and a header line that says where it came from."""
    inf = draft.plan.inference
    if inf.engine is not Engine.SGLANG:  # no SGLang fraction was judged: the release's own default
        return [], ""
    if inf.mem_fraction_static > 0:
        return ["--mem-fraction-static", fraction_text(inf.mem_fraction_static)], ""
    try:
        gpu = gpu_for(draft.plan)
    except PlanError:
        draft.cannot("inference.mem_fraction_static", "the plan's card is not in the catalogue: SGLang's own default")
        return [], ""
    fraction = sglang_flag_fraction(draft.plan, gpu)
    if fraction < MIN_FRACTION:  # a card smaller than the release's reserve: no fraction SGLang can start with
        draft.cannot(
            "inference.mem_fraction_static",
            f"SGLang {inf.sglang_version.value}'s default on the {gpu.name} is {fraction:g}: its reserve takes the "
            "whole card, so there is no static fraction to write",
        )
        return [], ""
    note = (
        f"--mem-fraction-static {fraction_text(fraction)}: SGLang {inf.sglang_version.value}'s default on the "
        f"{gpu.name} with TP {inf.tensor_parallel} x PP {inf.pipeline_parallel}, as the estimate took it (written, so "
        "another card keeps it)"
    )
    return ["--mem-fraction-static", fraction_text(fraction)], note


def export_sglang(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    inf = plan.inference
    version = inf.sglang_version
    env = [f"{LONGER_CONTEXT_ENV}=1"] if past_limit(plan) else []
    argv = [*env, "python", "-m", "sglang.launch_server", "--model-path", model_reference(draft, model_ref)]
    argv += [*_weights(draft), "--context-length", str(inf.context), *_layout(draft, version)]
    fraction, note = _fraction(draft)
    argv += fraction
    if sglang_multimodal_asked(plan):  # switches with no value, written last
        argv.append(ENABLE_MULTIMODAL)
    if not inf.cuda_graphs:  # (read_sglang takes them out first)
        argv.append(DISABLE_CUDA_GRAPH)
    start = argv.index("sglang.launch_server") + 1  # every option checked against the wheel the header pins
    argv[start:], left_out = leave_out_refused(
        draft,
        argv[start:],
        (f"SGLang {version.value}", sglang_release_flags(version)),
        ([v.value for v in SglangVersion], sglang_release_flags),
        FLAG_FIELDS,
        {},
        sglang_release_values,
    )
    if inf.engine is not Engine.SGLANG:
        draft.cannot(
            "inference.engine", f"the plan was judged under {ENGINE_LABELS[inf.engine]}'s memory rules, not SGLang's"
        )
    draft.outside(["inference.concurrent", "inference.new_tokens"], CLIENT_WHY)
    draft.outside(
        [
            "inference.gpu_memory_utilization",
            "inference.max_num_seqs",
            "inference.max_num_batched_tokens",
            "inference.prefix_caching",
        ],
        "vLLM's, not SGLang's",
    )
    lines = [
        f"python -m sglang.launch_server written by VRAM Planner (flags of SGLang {version.value})",
        f"{PIP_MARK}{version.value}  (the release whose rules the estimate followed)",
        *left_out,
    ]
    if note:
        lines.append(note)
    if env:
        lines.append(
            f"{LONGER_CONTEXT_ENV}=1: the context is longer than the model's {plan.model.max_position_embeddings:,}"
        )
    if inf.weight_dtype in (WeightFormat.AWQ_INT4, WeightFormat.GPTQ_INT4):
        lines.append(
            f"Serve an {QUANTIZATION[inf.weight_dtype].upper()} checkpoint of the model: the weights come from it."
        )
    if sglang_text_model(plan.model, inf):  # the words the window, the command line and the report give
        lines.append(tower_line(plan.model, inf))
    lines += gptq_int8_header(draft, "SGLang")
    return draft.finish(Target.SGLANG, header(lines) + " ".join(shlex.quote(w) for w in argv) + "\n")


def read_sglang(text: str) -> tuple[str, dict[str, Any]]:
    """The model and the plan fields of a ``sglang.launch_server`` line (the inverse of :func:`export_sglang`); what
    else the line holds, and the words not understood: :func:`core.files.launch.serve_command.read_command`."""
    from core.files.launch.serve_command import read_command

    read = read_command(text)
    return read.model_ref, dict(read.fields)
