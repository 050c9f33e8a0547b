"""The Megatron-Bridge export's command through Megatron-Bridge's own override path, as far as it runs on this CPU.

Not a recorded check (docs/CONFIGS.md, "Launch exports checked by the tools' own parsers", says why): Megatron-Bridge
wants Python 3.12 and Transformer Engine, so three things are put in place first, each named where it is done:
``typing.override`` on Python 3.11, an empty ``transformer_engine`` module, and the ``megatron.bridge.recipes`` package
entered without its ``__init__`` (which imports every model family: diffusers, modelopt, megatron.energon). The
recipe's Hub download is replaced by ``AutoBridge.from_hf_config`` on the plan's own dimensions. Then the header's
words go through ``run_recipe.parse_args``, the real recipe, ``_apply_dataset`` and ``apply_cli_overrides`` (Hydra's
struct overrides), one override at a time, and each refusal is printed with Hydra's words::

    git -C MIRROR archive 067f987d src/megatron scripts/training scripts/common | tar -x -C /tmp/mb
    git -C MEGATRON_LM archive 2a75ac12:megatron/core --prefix=core/ | tar -x -C /tmp/mlm/megatron   # and training/
    .venv-measure/bin/pip install omegaconf==2.3.0 hydra-core==1.3.2 diffusers nvidia-modelopt pulp ipython
    PYTHONPATH=. .venv-measure/bin/python -m tools.measure.megatron_override_probe /tmp/mb /tmp/mlm lora-attn
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import shlex
import sys
import types
import typing
from typing import Any


class _AnyAttribute(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub


class _Stub(metaclass=_AnyAttribute):
    """Stands for any Transformer Engine class, function or submodule: built, called, subclassed or looked into, it
    does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        return _Stub()


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub


class _TransformerEngine:
    """A meta-path finder that answers every ``transformer_engine`` import with an empty module (a CUDA build)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name == "transformer_engine" or name.startswith("transformer_engine."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)  # type: ignore[arg-type]
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "2.12.0"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _prepare(bridge: str, megatron_lm: str) -> None:
    if not hasattr(typing, "override"):  # Python 3.12's, used by Megatron-LM megatron/training/models/hybrid.py:5
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]
    sys.meta_path.insert(0, _TransformerEngine())  # type: ignore[arg-type]
    sys.path[:0] = [f"{bridge}/src", megatron_lm, f"{bridge}/scripts/training"]
    recipes = types.ModuleType("megatron.bridge.recipes")
    recipes.__path__ = [f"{bridge}/src/megatron/bridge/recipes"]
    sys.modules["megatron.bridge.recipes"] = recipes


def probe(bridge: str, megatron_lm: str, plan_name: str, dataset: str = "squad") -> list[str]:
    """Each override of the plan's exported command that Megatron-Bridge refuses, with its words."""
    _prepare(bridge, megatron_lm)
    import run_recipe  # type: ignore[import-not-found]
    import transformers
    from megatron.bridge import AutoBridge  # type: ignore[import-not-found]
    from recipe_metadata import recipe_task  # type: ignore[import-not-found]
    from recipe_runner import _load_with_optional_kwargs, apply_cli_overrides  # type: ignore[import-not-found]

    from core.files.launch import Target, export
    from tools.measure.export_plans import named_plans

    plan, _ = named_plans()[plan_name]
    text = export(plan, Target.MEGATRON_BRIDGE).text
    launch = next(line[2:] for line in text.splitlines() if line.startswith("# torchrun "))
    words = shlex.split(launch.replace("<dataset>", dataset))
    args, overrides = run_recipe.parse_args(words[words.index("scripts/training/run_recipe.py") + 1 :])
    m = plan.model
    hf = transformers.LlamaConfig(
        vocab_size=m.vocab_size,
        hidden_size=m.hidden_size,
        num_hidden_layers=m.num_layers,
        num_attention_heads=m.num_heads,
        num_key_value_heads=m.num_kv_heads,
        head_dim=m.head_dim,
        intermediate_size=m.intermediate_size,
        max_position_embeddings=m.max_position_embeddings,
        tie_word_embeddings=m.tie_embeddings,
        architectures=["LlamaForCausalLM"],
    )
    AutoBridge.from_hf_pretrained = classmethod(lambda cls, path, **kw: cls.from_hf_config(hf))
    family = importlib.import_module(f"megatron.bridge.recipes.{m.family}")
    builder = getattr(family, f"{args.model}_{recipe_task(args.mode)}_config")
    scheme = args.mode if args.mode in ("lora", "dora") else None
    refused = []
    for override in overrides:  # each on a recipe of its own (a deep copy of BridgeGPTModelConfig is not the same)
        config = _load_with_optional_kwargs(builder, peft_scheme=scheme, seq_length=None)
        try:
            apply_cli_overrides(run_recipe._apply_dataset(config, args), [override])
        except Exception as exc:  # Hydra's OverridesError, as run_recipe.py would stop on it
            refused.append(f"{override}: {str(exc).splitlines()[0]}")
    return refused


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    for line in probe(*sys.argv[1:4]) or ["no override refused"]:
        print(line)
