"""The Llama-2-7B LoRA runs at 2,048 tokens that the loss-output settings were read for (llama-recipes'
PR #41 and #165, Answer.AI's fsdp_qlora): their plan, and the command line's peak for it. Llama-2-7B:
meta-llama/Llama-2-7b-hf config.json (32 layers, 32 heads of 128, vocabulary 32,000)."""

from __future__ import annotations

import json

import pytest

from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.plan import Method, Plan, Workload

SEQ = 2_048


def lora_plan(micro_batch: int, model: str = "llama-2-7b", **changes: object) -> Plan:
    """A LoRA plan of ``model`` at ``micro_batch`` × 2,048 tokens with full checkpointing, and ``changes``."""
    plan = Plan(
        model=find_model(model).spec,
        method=Method.LORA,
        workload=Workload(micro_batch=micro_batch, seq_len=SEQ),
        checkpointing=True,
    )
    return plan.with_changes(**changes) if changes else plan


def cli_peak_bytes(capsys: pytest.CaptureFixture[str], micro_batch: int, *flags: str) -> int:
    """``vramplan estimate``'s peak for Llama-2-7B LoRA at ``micro_batch`` × 2,048 tokens, with ``flags``."""
    args = ["estimate", "--model", "llama-2-7b", "--method", "lora", "--micro-batch", str(micro_batch)]
    assert cli_main([*args, "--seq", str(SEQ), *flags, "--json"]) == 0
    peak: int = json.loads(capsys.readouterr().out)["peak_bytes"]
    return peak
