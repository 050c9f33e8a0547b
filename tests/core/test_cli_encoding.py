"""The command line on a stream that cannot print our symbols: a Windows console redirected to a
cp1252 file, an ASCII locale. Counts read 8.03e9, not "10\\u2079"; the fallback is one rule
(core.format.for_encoding), applied where every subcommand's output is written."""

from __future__ import annotations

import io
import sys

import pytest

from core.cli.app import main
from core.cli.output import write_output
from core.format import for_encoding, scientific


def _run_into(monkeypatch: pytest.MonkeyPatch, encoding: str, *args: str) -> str:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, newline="\n")
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(list(args)) == 0
    stream.flush()
    return raw.getvalue().decode(encoding)


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_counts_read_as_e_notation_where_superscripts_do_not_encode(
    monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    # Llama 3.1 8B's 8,030,261,248 parameters (its config.json on the Hub: 32 layers, hidden 4096,
    # MLP 14336, 8 KV heads, vocabulary 128,256, untied head) print as 8.03 × 10⁹ on a UTF-8 terminal.
    out = _run_into(monkeypatch, encoding, "estimate", "--model", "llama-3.1-8b", "--method", "lora")
    assert "parameters 8.03e9 total" in out
    assert "\\u" not in out  # no escape of a character our own formatting wrote
    assert "\\x" not in out
    if encoding == "ascii":
        assert out.isascii()
        assert "Llama 3.1 8B * lora" in out  # the middle dot of the heading, which ASCII lacks
    else:
        assert "Llama 3.1 8B · lora" in out  # cp1252 has the middle dot (0xB7) and keeps it


def test_a_utf8_stream_keeps_the_superscripts(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _run_into(monkeypatch, "utf-8", "estimate", "--model", "llama-3.1-8b", "--method", "lora")
    assert "parameters 8.03 × 10⁹ total" in out


@pytest.mark.parametrize(
    ("text", "cp1252", "ascii"),
    [
        # core.format._times_ten's forms: three digits for a figure, four for a formula
        (f"{scientific(8.03e9)} FLOPs", "8.03e9 FLOPs", "8.03e9 FLOPs"),
        ("2.614 × 10⁹ × 4 B", "2.614e9 × 4 B", "2.614e9 x 4 B"),
        ("1.00 × 10⁻³", "1.00e-3", "1.00e-3"),
        # other raised figures and our own symbols; cp1252 has ², ×, …, — and keeps them
        ("h² · d", "h² · d", "h^2 * d"),
        ("−5% … ≈ 3 ≤ 4 — ok", "-5% … ~ 3 <= 4 — ok", "-5% ... ~ 3 <= 4 -- ok"),
        ("Wᵀ x", "W^T x", "W^T x"),
    ],
)
def test_for_encoding(text: str, cp1252: str, ascii: str) -> None:
    assert for_encoding(text, "cp1252") == cp1252
    assert for_encoding(text, "ascii") == ascii
    assert for_encoding(text, "utf-8") == text


def test_a_character_from_a_file_is_still_escaped() -> None:
    # A model's name in another script has no ASCII form of ours: the stream escapes it, as before.
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="cp1252", newline="\n")
    write_output("模型 8.03 × 10⁹\n", stream)
    assert raw.getvalue().decode("cp1252") == "\\u6a21\\u578b 8.03e9\n"


def test_an_unknown_encoding_leaves_the_text() -> None:
    assert for_encoding("8.03 × 10⁹", "no-such-codec") == "8.03 × 10⁹"
