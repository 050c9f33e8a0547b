"""The vLLM and SGLang exports never write a flag the plan's release refuses (issue 23): for every covered release
and a set of plans, every option the command holds is one that release's parser takes (resources/engine_flags/
vllm_serve.txt and sglang_server.txt, read from the wheels by tools/engine_flags/). A flag the release has not is
left out and named among what the export cannot say.

* ``--data-parallel-size``: vllm_serve.txt's row ``--data-parallel-size 0.8-0.34`` (read by
  tools/engine_flags/vllm_serve_flags.py from the 0.7.3 and 0.8.5.post1 wheels, among others: no ``add_argument``
  of it in 0.7.3's ``vllm/engine/arg_utils.py``). Before 0.8 one server is one replica.
* ``--pp-size``: sglang 0.4.6's ``server_args.py`` has none (0.4.6.post5's line 705 adds it; the export pins
  ``pip install sglang==0.4.6``, the release's own wheel).

Nor a value the release refuses: every ``--dtype``, ``--quantization`` and ``--kv-cache-dtype`` value written is one
the release takes (the files' value rows; tests/core/test_engine_flag_values.py cites the wheels). A plan whose weight
format the release does not load is refused (mxfp4 before vLLM 0.10 and SGLang 0.5.1, bitsandbytes after vLLM 0.27).
"""

from __future__ import annotations

import shlex
from typing import Final

import pytest

from core.dtypes import KvDtype, WeightFormat
from core.errors import PlanError
from core.files.launch import Export
from core.files.launch.common import Draft
from core.files.launch.engine_flags import (
    sglang_release_flags,
    sglang_release_values,
    vllm_release_flags,
    vllm_release_values,
)
from core.files.launch.sglang import export_sglang
from core.files.launch.vllm import FLAG_FIELDS, export_vllm, leave_out_refused
from core.plan import Plan, PrefixCaching, SglangVersion, VllmVersion
from core.presets import plan_for_model

# name -> the serving settings of one plan (on an H100, the catalogue's model): TP, replicas, pipeline stages,
# quantised weights, an fp8 KV cache, prefix caching either way, the engine's batch limits, CUDA graphs off.
PLANS: dict[str, dict[str, object]] = {
    "tp": {"tensor_parallel": 2},
    "replicas": {"replicas": 2},
    "pipeline": {"pipeline_parallel": 2},
    "fp8 weights, fp8 KV": {"weight_dtype": WeightFormat.FP8, "kv_dtype": KvDtype.FP8},
    "awq": {"weight_dtype": WeightFormat.AWQ_INT4},
    "gptq int8": {"weight_dtype": WeightFormat.GPTQ_INT8},
    "nf4": {"weight_dtype": WeightFormat.NF4},
    "prefix caching on": {"prefix_caching": PrefixCaching.ON},
    "prefix caching off": {"prefix_caching": PrefixCaching.OFF},
    "batch limits (chunked prefill)": {
        "max_num_seqs": 64,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.85,
    },
    "mxfp4": {"weight_dtype": WeightFormat.MXFP4},
    "image-text model, text only": {"model": "gemma-3-4b", "text_only": True},
    "image-text model, images on": {"model": "gemma-3-4b", "sglang_enable_multimodal": True},
    "eager": {"cuda_graphs": False},
    "everything": {
        "tensor_parallel": 2,
        "pipeline_parallel": 2,
        "replicas": 2,
        "kv_dtype": KvDtype.FP8,
        "prefix_caching": PrefixCaching.OFF,
        "cuda_graphs": False,
        "mem_fraction_static": 0.8,
    },
}


def _plan(engine: str, version_field: str, version: str, settings: dict[str, object]) -> Plan:
    settings = dict(settings)
    plan = plan_for_model(str(settings.pop("model", "llama-3.1-8b"))).with_hardware(gpu="h100-sxm")
    return plan.with_inference(engine=engine, context=4096, **{version_field: version}, **settings)


def _values(export: Export) -> dict[str, str]:
    """The recorded options' values the command writes (``--quantization mxfp4``)."""
    words = shlex.split(export.text.splitlines()[-1])
    checked = ("--dtype", "--quantization", "--kv-cache-dtype", "--load-format", "--attention-backend")
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in checked}


def _options(export: Export) -> list[str]:
    """The option strings of the command (its last line) after the program (``vllm serve``, ``python -m
    sglang.launch_server``), ``--x=y`` as ``--x``."""
    words = shlex.split(export.text.splitlines()[-1])
    start = words.index("sglang.launch_server") if "sglang.launch_server" in words else words.index("serve")
    return [w.partition("=")[0] for w in words[start + 1 :] if w.startswith("-")]


# Plans no release of the engine allows (core.plan refuses them: SGLang builds every tower, so no text-only plan).
NOT_A_PLAN: Final = {("sglang", "image-text model, text only")}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("name", PLANS)
def test_every_flag_an_export_writes_is_one_its_release_takes(engine: str, name: str) -> None:
    releases = [v.value for v in (VllmVersion if engine == "vllm" else SglangVersion)]
    vllm = engine == "vllm"
    flags_of, exporter = (vllm_release_flags, export_vllm) if vllm else (sglang_release_flags, export_sglang)
    values_of = vllm_release_values if vllm else sglang_release_values
    exported = 0
    for release in releases:
        try:  # a release the plan refuses (gemma3's tower before vLLM 0.15, --enable-multimodal before SGLang 0.4.6)
            plan = _plan(engine, f"{engine}_version", release, PLANS[name])
        except PlanError:
            continue
        export = exporter(plan)
        exported += 1
        refused = [o for o in _options(export) if o not in flags_of(release)]
        assert refused == [], (release, refused)
        bad = {o: v for o, v in _values(export).items() if not values_of(release, o).takes(v)}  # type: ignore
        assert bad == {}, (release, bad)
        assert f"flags of {'vLLM' if vllm else 'SGLang'} {release})" in export.text.splitlines()[0]
    assert exported or (engine, name) in NOT_A_PLAN


def test_replicas_before_vllm_0_8_are_left_out_and_said() -> None:
    for line, written in ((VllmVersion.V0_7, False), (VllmVersion.V0_8, True)):
        export = export_vllm(_plan("vllm", "vllm_version", line.value, {"replicas": 3}))
        assert ("--data-parallel-size" in _options(export)) is written, line
        assert export.cannot("inference.replicas") is not written, line
    old = export_vllm(_plan("vllm", "vllm_version", "0.7", {"replicas": 3}))
    why = next(u.why for u in old.unexpressed if u.field == "inference.replicas")
    assert why == (
        "vLLM 0.7 has no --data-parallel-size (0.8 on): left out; run 3 servers, one per replica, behind a load "
        "balancer"
    )
    assert f"# {why}" in old.text.splitlines()  # said in the command's header too, wherever it is pasted


def test_a_value_the_release_refuses_is_left_out_and_said() -> None:
    """vLLM 0.28 has no bitsandbytes quantization: a plan carried there is refused (core.plan); the exports' check,
    handed the 0.28 release and the words an NF4 plan writes, leaves the name out rather than write it for vLLM to
    stop on, and says so on the plan field."""
    plan = _plan("vllm", "vllm_version", "0.27", {"weight_dtype": WeightFormat.NF4})
    assert "--quantization bitsandbytes" in export_vllm(plan).text
    with pytest.raises(PlanError, match="bitsandbytes NF4"):
        plan.with_inference(vllm_version="0.28")
    draft = Draft(plan)
    kept, said = leave_out_refused(
        draft,
        ["--dtype", "bfloat16", "--quantization", "bitsandbytes", "--max-model-len", "4096"],
        ("vLLM 0.28", vllm_release_flags("0.28")),
        ([v.value for v in VllmVersion], vllm_release_flags),
        FLAG_FIELDS,
        {},
        vllm_release_values,
    )
    assert kept == ["--dtype", "bfloat16", "--max-model-len", "4096"]
    assert said == ["vLLM 0.28 takes no --quantization bitsandbytes (up to 0.27): left out"]
    assert draft._why["inference.weight_dtype"] == said[0]


def test_the_sglang_export_leaves_pp_size_out_on_0_4_6_as_before() -> None:
    export = export_sglang(_plan("sglang", "sglang_version", "0.4.6", {"pipeline_parallel": 2}))
    assert "--pp-size" not in _options(export) and export.cannot("inference.pipeline_parallel")
    newer = export_sglang(_plan("sglang", "sglang_version", "0.4.7", {"pipeline_parallel": 2}))
    assert "--pp-size" in _options(newer)
