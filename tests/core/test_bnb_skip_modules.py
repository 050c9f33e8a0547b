"""Modules a bitsandbytes base keeps in 16 bits (``bnb_skip_modules``, issue 22 item 4): transformers'
``llm_int8_skip_modules``, matched as huggingface/transformers 01ae98ae2414210efd0d9ac1ffe78ff21588f1f7
``src/transformers/integrations/bitsandbytes.py`` ``_replace_with_bnb_linear`` matches it (a linear's own
name, ``key + "."`` inside its dotted name, or the whole name), and replacing the default list (the
head) as ``quantizers/quantizer_bnb_4bit.py`` ``_process_model_before_weight_loading`` does.

Qwen3 14B's dimensions: Qwen/Qwen3-14B config.json (the catalogue's config_source): hidden_size 5120,
intermediate_size 17408, num_hidden_layers 40, vocab_size 151936, tie_word_embeddings false."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import Quant, nf4_bytes_per_weight
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.files.importer import import_model
from core.model import ModelSpec, bnb_linear_names, kept_linears, skip_matches
from core.plan import Method, Plan

QWEN = find_model("qwen3-14b").spec
MLP_0 = 3 * 5120 * 17408  # gate, up and down of model.layers.0.mlp: 267,386,880 weights
HEAD = 151936 * 5120  # lm_head: 777,912,320 weights
NF4 = nf4_bytes_per_weight(True)  # the plan's default: double quantisation


def _plan(skip: str = "", **changes: object) -> Plan:
    return Plan(
        model=QWEN, model_id="qwen3-14b", method=Method.QLORA, quant=Quant.NF4, bnb_skip_modules=skip
    ).with_changes(**changes)


def _weights(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in estimate(plan).phases[0].bucket(BucketKey.WEIGHTS).terms}


def _by_start(terms: dict[str, float], start: str) -> float:
    (value,) = [v for k, v in terms.items() if k.startswith(start)]
    return value


def test_a_kept_mlp_moves_its_three_matrices_from_nf4_to_16_bits() -> None:
    before, after = _weights(_plan()), _weights(_plan("model.layers.0.mlp,lm_head"))
    assert before["nf4 block weights"] - after["nf4 block weights"] == pytest.approx(MLP_0 * NF4)
    assert _by_start(after, "unquantised") - _by_start(before, "unquantised") == MLP_0 * 2
    label = next(k for k in after if k.startswith("unquantised"))
    assert "3 block matrices kept: model.layers.0.mlp,lm_head" in label and "head" in label


def test_a_list_without_the_head_quantises_the_head_as_transformers_does() -> None:
    # The given list replaces get_keys_to_not_convert's ["lm_head"]: the head becomes Linear4bit.
    named, unnamed = _weights(_plan("model.layers.0.mlp,lm_head")), _weights(_plan("model.layers.0.mlp"))
    assert unnamed["nf4 block weights"] - named["nf4 block weights"] == pytest.approx(HEAD * NF4)
    assert _by_start(named, "unquantised") - _by_start(unnamed, "unquantised") == HEAD * 2
    assert next(k for k in unnamed if k.startswith("unquantised")).startswith("unquantised (embeddings, norms")


def test_unsloth_keeps_the_head_whatever_the_list_says() -> None:
    # unslothai/unsloth-zoo ce232d6 unsloth_zoo/peft_utils.py SKIP_QUANTIZATION_MODULES starts with lm_head.
    plain, unsloth = _weights(_plan("model.layers.0.mlp")), _weights(_plan("model.layers.0.mlp", unsloth=True))
    assert plain["nf4 block weights"] - unsloth["nf4 block weights"] == pytest.approx(HEAD * NF4)


def test_names_match_as_transformers_matches_them() -> None:
    assert skip_matches("down_proj", "model.layers.3.mlp.down_proj")  # the module's own name
    assert skip_matches("model.layers.1.mlp", "model.layers.1.mlp.up_proj")
    assert not skip_matches("model.layers.1.mlp", "model.layers.10.mlp.up_proj")
    assert skip_matches("0.mlp", "model.layers.10.mlp.up_proj")  # a substring test: layers 0, 10, 20, 30
    assert kept_linears(QWEN, ("0.mlp",)).matrices == 4 * 3
    assert kept_linears(QWEN, ("down_proj",)).matrices == 40
    assert kept_linears(QWEN, ("model.layers.3.self_attn",)).elements == 2 * 5120 * 5120 + 2 * 5120 * 1024


def test_an_empty_name_is_refused_and_a_name_matching_nothing_is_warned() -> None:
    with pytest.raises(PlanError, match="empty name"):
        _plan("model.layers.0.mlp,,lm_head")
    texts = [w.text for w in estimate(_plan("model.layer.0.mlp")).warnings]
    assert any("model.layer.0.mlp matches no linear layer of Qwen3 14B" in t for t in texts)
    assert not any("matches no linear" in t for t in [w.text for w in estimate(_plan("lm_head")).warnings])


def test_the_default_moves_nothing() -> None:
    assert _weights(_plan()) == _weights(_plan("lm_head"))


def test_plan_file_round_trip_and_old_files() -> None:
    plan = _plan("model.layers.0.mlp,model.layers.3.self_attn,lm_head")
    assert planfile.loads(planfile.dumps(plan), "test") == plan
    data = json.loads(planfile.dumps(_plan()))
    assert data["plan"].pop("bnb_skip_modules") == ""
    assert planfile.loads(json.dumps(data), "old file") == _plan()


def _config(tmp_path: Path, quant: dict[str, object] | None) -> Path:
    config = dict(find_model("qwen3-14b").config)
    if quant is not None:
        config["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_a_pre_quantised_config_fills_the_setting(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {
            "quant_method": "bitsandbytes",
            "load_in_4bit": True,
            "llm_int8_skip_modules": ["lm_head", "model.layers.0.mlp"],
        },
    )
    imported = import_model(path)
    assert imported.skip_modules == "lm_head,model.layers.0.mlp"
    assert "llm_int8_skip_modules keeps lm_head,model.layers.0.mlp in 16 bits" in imported.skip_note
    assert import_model(_config(tmp_path, None)).skip_modules == ""
    assert import_model(_config(tmp_path, {"quant_method": "gptq", "llm_int8_skip_modules": ["x"]})).skip_modules == ""
    with pytest.raises(PlanFileError, match="llm_int8_skip_modules"):
        import_model(_config(tmp_path, {"quant_method": "bitsandbytes", "llm_int8_skip_modules": ["lm_head", ""]}))


def test_the_command_line_sets_it_and_config_fills_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    kept = estimate(_plan("model.layers.0.mlp,lm_head"))
    args = ["estimate", "--method", "qlora", "--quant", "nf4", "--json"]
    assert main([args[0], "--model", "qwen3-14b", "--bnb-skip-modules", "model.layers.0.mlp,lm_head", *args[1:]]) == 0
    assert json.loads(capsys.readouterr().out)["judgement"]["total_bytes"] == round(kept.total_bytes)
    path = _config(
        tmp_path, {"quant_method": "bitsandbytes", "llm_int8_skip_modules": ["model.layers.0.mlp", "lm_head"]}
    )
    assert main([args[0], "--config", str(path), *args[1:]]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["judgement"]["total_bytes"] == round(kept.total_bytes)
    assert "llm_int8_skip_modules keeps model.layers.0.mlp,lm_head" in captured.err


def test_other_methods_ignore_it_and_say_so() -> None:
    plan = replace(_plan("model.layers.0.mlp"), method=Method.LORA)
    assert any("QLoRA (bitsandbytes) base only" in w.text for w in estimate(plan).warnings)


def _brute_force(model: ModelSpec, keys: tuple[str, ...]) -> tuple[int, int, bool, tuple[str, ...]]:
    """transformers' own loop: every linear's dotted name against every key (skip_matches)."""
    matrices = elements = 0
    head_kept, used = not model.head_params(), set()
    for name, el in bnb_linear_names(model):
        hits = [k for k in keys if skip_matches(k, name)]
        used.update(hits)
        if hits and name == "lm_head":
            head_kept = True
        elif hits:
            matrices, elements = matrices + 1, elements + el
    return matrices, elements, head_kept, tuple(k for k in keys if k not in used)


# A small MoE whose layer and expert numbers share digits (12 layers, 24 experts), so that substring
# keys match across the layer / expert boundary: the case kept_linears counts without listing names.
SMALL_MOE = replace(
    find_model("qwen3-30b-a3b").spec,
    name="small MoE",
    num_layers=12,
    num_experts=24,
    hidden_size=64,
    intermediate_size=128,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    vocab_size=1000,
)
TRICKY = (
    "1",
    "0.mlp",
    "experts.1",
    "s.1",
    "1.gate_proj",
    "model.layers.1.mlp.experts.10.up_proj",
    "mlp.experts",
    "xperts.2",
    "11.down",
    "2.mlp.experts.1",
    "gate_proj",
    "lm_head",
    "junk",
    "layers.1",
    "3.up_proj",
    "model.layers.11.mlp.experts.023.up_proj",
    "model.layers.11.mlp.experts.23.down_proj",
    "1.mlp.experts.2",
)


@pytest.mark.parametrize("model", [SMALL_MOE, QWEN], ids=["small-moe", "qwen3-14b"])
def test_counted_without_listing_names_as_transformers_would_match_them(model: ModelSpec) -> None:
    for key in TRICKY:
        got = kept_linears(model, (key,))
        assert (got.matrices, got.elements, got.head_kept, got.unmatched) == _brute_force(model, (key,)), key
    got = kept_linears(model, TRICKY)
    assert (got.matrices, got.elements, got.head_kept, got.unmatched) == _brute_force(model, TRICKY)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.mlpexrtsgaodwn_", min_size=1, max_size=12), min_size=1, max_size=3))
def test_any_key_counts_as_the_names_would(keys: list[str]) -> None:
    got = kept_linears(SMALL_MOE, tuple(keys))
    assert (got.matrices, got.elements, got.head_kept, got.unmatched) == _brute_force(SMALL_MOE, tuple(keys))


def test_a_custom_model_of_ten_thousand_layers_of_4096_experts_is_counted() -> None:
    # core.model LIMITS: 10,000 layers and 4,096 experts, 1.2 × 10⁸ expert linears: listing their names
    # took the GUI monkey test to 20 GB. "1.mlp." is in the names of each layer whose number ends in 1
    # (1,000 of 10,000), every expert's gate, up and down linears.
    model = replace(SMALL_MOE, num_layers=10_000, num_experts=4_096)
    got = kept_linears(model, ("1.mlp",))
    assert got.matrices == 1_000 * 4_096 * 3
