"""axolotl's current spellings (v0.10-0.12 schemas): ``bfloat16`` / ``float16`` load the model in
that dtype with no AMP, and FSDP is a ``fsdp_config`` table beside ``fsdp_version``.

Before these were read, an axolotl file for pure bf16 came back as bf16 AMP, and an FSDP2 file
written as axolotl documents it came back as DDP (found by the launch-config round trip)."""

from __future__ import annotations

import pytest

from core.files.runconfig import ConfigKind, RunSettings, loads_run_config


def settings(text: str) -> RunSettings:
    return loads_run_config(
        ("base_model: meta-llama/Llama-3.1-8B\n" + text).encode(), "a.yaml", ConfigKind.AXOLOTL
    ).settings


@pytest.mark.parametrize(
    ("flags", "dtype", "autocast"),
    [
        ("bf16: true\n", "bf16", "bf16"),
        ("bf16: false\nbfloat16: true\n", "bf16", "none"),
        ("bf16: full\n", "bf16", "none"),
        ("bf16: false\nfloat16: true\n", "fp16", "none"),
        ("bf16: false\nfp16: true\n", "fp16", "fp16"),
        ("bf16: false\n", "fp32", "none"),
    ],
)
def test_amp_flags_and_load_dtypes(flags: str, dtype: str, autocast: str) -> None:
    found = settings(flags)
    assert (found.model_dtype, found.autocast) == (dtype, autocast)


def test_fsdp_config_table_with_fsdp_version() -> None:
    found = settings("fsdp_version: 2\nfsdp_config:\n  reshard_after_forward: false\n  offload_params: true\n")
    assert (found.sharding, found.reshard_after_forward, found.offload) == ("fsdp", False, "params")
    legacy = settings("fsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n")
    assert (legacy.sharding, legacy.reshard_after_forward, legacy.offload) == ("fsdp", True, None)
    fsdp1 = settings("fsdp_version: 1\nfsdp_config:\n  sharding_strategy: SHARD_GRAD_OP\n")
    assert (fsdp1.sharding, fsdp1.reshard_after_forward) == ("fsdp", False)


def test_the_word_list_still_wins_when_both_are_given() -> None:
    found = settings("fsdp: [shard_grad_op, auto_wrap]\nfsdp_config:\n  reshard_after_forward: true\n")
    assert (found.sharding, found.reshard_after_forward) == ("fsdp", False)
