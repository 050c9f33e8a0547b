"""The vLLM and SGLang exports never write a flag the plan's release refuses (issue 23): for every covered release
and a set of plans, every option the command holds is one that release's parser takes (resources/engine_flags/
vllm_serve.txt and sglang_server.txt, read from the wheels by tools/engine_flags/). A flag the release has not is
left out and named among what the export cannot say.

* ``--data-parallel-size``: vllm_serve.txt's row ``--data-parallel-size 0.8-0.34`` (read by
  tools/engine_flags/vllm_serve_flags.py from the 0.7.3 and 0.8.5.post1 wheels, among others: no ``add_argument``
  of it in 0.7.3's ``vllm/engine/arg_utils.py``). Before 0.8 one server is one replica.
* ``--pp-size``: sglang 0.4.6's ``server_args.py`` has none (0.4.6.post5's line 705 adds it; the export pins
  ``pip install sglang==0.4.6``, the release's own wheel).
"""

from __future__ import annotations

import shlex
from typing import Final

import pytest

from core.dtypes import KvDtype, WeightFormat
from core.errors import PlanError
from core.files.launch import Export
from core.files.launch.engine_flags import sglang_release_flags, vllm_release_flags
from core.files.launch.sglang import export_sglang
from core.files.launch.vllm import export_vllm
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


def test_the_sglang_export_leaves_pp_size_out_on_0_4_6_as_before() -> None:
    export = export_sglang(_plan("sglang", "sglang_version", "0.4.6", {"pipeline_parallel": 2}))
    assert "--pp-size" not in _options(export) and export.cannot("inference.pipeline_parallel")
    newer = export_sglang(_plan("sglang", "sglang_version", "0.4.7", {"pipeline_parallel": 2}))
    assert "--pp-size" in _options(newer)
