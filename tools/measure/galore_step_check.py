"""GaLore AdamW's state and step peak on a small transformers Llama, measured on CPU against the planner's rules
(core.training.optimizer: _galore_state_terms, _galore_temporary, galore_svd_bytes).

The parameter groups are transformers 5.25's (trainer_optimizer.py _setup_low_rank_optimizer): the Linear weights
under optim_target_modules ["attn", "mlp"] with rank / update_proj_gap / scale / proj_type, the rest plain. State:
the bytes of every state tensor and of the projector's ortho_matrix per parameter after one step. Step peak: under
LiveBytes (a TorchDispatchMode counting every storage an op makes until it dies), the first step (the projector's
SVD runs: iter 0) and the second (no SVD), with the moments existing before the second.

    /tmp/torchenv/bin/python tools/measure/galore_step_check.py  # torch 2.13.0 CPU, galore-torch 1.0, transformers 5.25
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from galore_torch import GaLoreAdamW
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_bytes import LiveBytes

RANK = 32
TARGETS = ("attn", "mlp")  # HF's optim_target_modules as its GaLore docs give it


def _model(dtype: torch.dtype) -> tuple[torch.nn.Module, list[str]]:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(dtype)
    names = [
        f"{n}.weight"
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and any(t in n for t in TARGETS)
    ]
    return model, names


def _optimizer(model: torch.nn.Module, targets: list[str]) -> GaLoreAdamW:
    target = [p for n, p in model.named_parameters() if n in targets]
    rest = [p for n, p in model.named_parameters() if n not in targets]
    groups = [
        {"params": rest},
        {"params": target, "rank": RANK, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"},
    ]
    return GaLoreAdamW(groups, lr=1e-3)


def _rule_state(shape: tuple[int, ...], targeted: bool, g: int) -> int:
    if not targeted:
        return 2 * shape[0] * (shape[1] if len(shape) > 1 else 1) * g
    big, small = max(shape), min(shape)
    r = min(RANK, small)
    return (2 * big * r + (small if g == 4 else r) * small) * g  # float32: ortho_matrix views the whole factor


def _rule_peak(model: torch.nn.Module, targets: list[str], g: int, svd: bool) -> int:
    shapes = [tuple(p.shape) for n, p in model.named_parameters() if n in targets]
    big, small = max(((max(s), min(s)) for s in shapes), key=lambda s: s[0] * s[1])
    r = min(RANK, small)
    step = max(3 * max(s) * min(RANK, min(s)) + 2 * s[0] * s[1] for s in shapes) * g
    rest = max(2 * p.numel() * g for n, p in model.named_parameters() if n not in targets)
    # lm_head, the rest group's last and largest, keeps denom and norm_grad (Python locals) until the first targeted
    # weight reassigns them: its projected gradient and denominator are made beside them.
    first = shapes[0]
    rest += 2 * max(first) * min(RANK, min(first)) * g
    refresh = (0 if g == 4 else big * small * 4) + (big * small + small * small + small) * 4 + (big * r + r * r) * 4
    refresh += (big * small + big * r) * g  # the loop's locals from the parameter before
    return max(step, rest, refresh if svd else 0)


def _step(model: torch.nn.Module, optimizer: GaLoreAdamW, keep: list[torch.Tensor]) -> LiveBytes:
    live = LiveBytes()
    for t in keep:
        live.seen[t.untyped_storage().data_ptr()] = 0
    with live:
        optimizer.step()
    return live


def check(dtype: torch.dtype) -> None:
    g = torch.empty((), dtype=dtype).element_size()
    model, targets = _model(dtype)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizer = _optimizer(model, targets)
    keep = [t for p in model.parameters() for t in (p, p.grad)]
    first = _step(model, optimizer, keep)
    named = dict(model.named_parameters())
    bad = 0
    for n, p in named.items():
        st = optimizer.state[p]
        got = sum(v.numel() * v.element_size() for v in st.values() if isinstance(v, torch.Tensor))
        if "projector" in st:
            got += st["projector"].ortho_matrix.untyped_storage().nbytes()  # a view keeps its whole storage
        want = _rule_state(tuple(p.shape), n in targets, g)
        bad += got != want
        if n.startswith(("model.layers.0.", "model.embed", "lm_head")):
            print(f"  state {n} {tuple(p.shape)}: measured {got:,} B, rule {want:,} B")
    print(f"{dtype}: {len(named) - bad}/{len(named)} parameters' state equal to the rule")
    keep += [v for p in model.parameters() for v in optimizer.state[p].values() if isinstance(v, torch.Tensor)]
    keep += [
        optimizer.state[p]["projector"].ortho_matrix for p in model.parameters() if "projector" in optimizer.state[p]
    ]
    second = _step(model, optimizer, keep)
    state = sum(_rule_state(tuple(p.shape), n in targets, g) for n, p in named.items())
    print(
        f"  first step (SVD) peak {first.peak:,} B (at {first.at}) less the state it made ({state:,} B): "
        f"{first.peak - state:,} B; rule {_rule_peak(model, targets, g, True):,} B"
    )
    print(f"  second step peak {second.peak:,} B (at {second.at}); rule {_rule_peak(model, targets, g, False):,} B")


if __name__ == "__main__":
    check(torch.float32)
    check(torch.bfloat16)
