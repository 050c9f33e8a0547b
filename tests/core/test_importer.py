"""Importing a config.json or a model folder: data only, sizes from safetensors headers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from core.catalogue import find_model
from core.errors import PlanFileError
from core.files.importer import import_model, read_safetensors_header


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]], lie: int = 0) -> None:
    """A real safetensors file (header + zero data) as the format specifies."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "I8": 1, "U8": 1}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) + lie) + raw + b"\0" * offset)


def test_config_json_file(tmp_path: Path) -> None:
    config = dict(find_model("llama-3.2-1b").config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    imported = import_model(tmp_path / "config.json")
    assert imported.spec.architecture_params() == 1_235_814_400  # Llama-3.2-1B, models.json source
    assert imported.checkpoint is None


def test_folder_counts_parameters_and_dtypes_from_headers(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "intermediate_size": 128,
        "vocab_size": 100,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [100, 64]),
            "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64]),
        },
    )
    write_safetensors(
        tmp_path / "model-00002-of-00002.safetensors",
        {
            "model.norm.weight": ("F32", [64]),
            "model.layers.0.self_attn.rotary_emb.inv_freq": ("F32", [8]),  # a buffer, not a parameter
        },
    )
    imported = import_model(tmp_path)
    assert imported.checkpoint is not None
    assert imported.checkpoint.params == 100 * 64 + 64 * 64 + 64
    assert imported.checkpoint.params_by_dtype == {"BF16": 100 * 64 + 64 * 64, "F32": 64}
    assert imported.checkpoint.buffers == 8
    assert imported.spec.total_params() == imported.checkpoint.params


def test_folder_never_touches_code_or_pickles(tmp_path: Path) -> None:
    config = dict(find_model("gpt2").config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "ran"
    (tmp_path / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    import_model(tmp_path)
    assert not marker.exists()


def test_header_that_lies_about_its_length(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"w": ("F32", [4])}, lie=10_000)
    with pytest.raises(PlanFileError, match="claims a"):
        read_safetensors_header(path)


def test_tensor_outside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    with pytest.raises(PlanFileError, match="outside the file"):
        read_safetensors_header(path)


@pytest.mark.parametrize("content", [b"{", b"\xff\xff", b"[]", b'{"model_type": "bert"}', b'{"model_type": "llama"}'])
def test_bad_config_gives_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(PlanFileError):
        import_model(tmp_path)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError, match="no config.json"):
        import_model(tmp_path)


def test_image_text_folder_overrides_the_language_model_only(tmp_path: Path) -> None:
    # An image-text checkpoint's shards hold its vision tower too; the spec counts the tower apart
    # (ModelSpec.vision_params), so the safetensors count less the tower is the language model's.
    text = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
    text |= {"head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 8, "intermediate_size": 16}
    vision |= {"num_hidden_layers": 1, "image_size": 28, "patch_size": 14, "vision_use_head": False}
    config = {"model_type": "gemma3", "text_config": text, "vision_config": vision, "mm_tokens_per_image": 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = import_model(tmp_path / "config.json").spec
    # SiglipVisionTransformer (transformers 5.25.0): patch conv 3·14²·8 + 8, 4 positions × 8, one layer
    # (4·(8² + 8) + 4·8 + 2·8·16 + 16 + 8), post-norm 2·8; Gemma3MultiModalProjector 8 × 64 + 8.
    assert spec.vision_params == (3 * 196 * 8 + 8) + 4 * 8 + (288 + 32 + 256 + 24) + 16 + (8 * 64 + 8)
    whole = spec.architecture_params() + spec.vision_params
    write_safetensors(tmp_path / "model.safetensors", {"everything": ("I8", [whole])})
    imported = import_model(tmp_path)
    assert imported.checkpoint is not None and imported.checkpoint.params == whole
    assert imported.spec.total_params() == spec.architecture_params()
    assert imported.spec.checkpoint_params() == whole
