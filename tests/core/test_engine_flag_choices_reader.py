"""tools/engine_flags/choices.py, the reader of each release's ``choices=`` behind the value rows of
resources/engine_flags/*.txt, on sources cut down from the wheels' own (the shapes, not the whole files):

* vllm 0.6.6.post1 ``vllm/engine/arg_utils.py`` line 348 (a literal list), line 529 (``[*QUANTIZATION_METHODS,
  None]`` with the list in ``quantization/__init__.py`` line 6), line 305 (``[f.value for f in LoadFormat]``).
* vllm 0.9.2 ``vllm/config.py`` lines 65 / 78: ``QuantizationMethods`` imported under TYPE_CHECKING, ``Any`` at run
  time; ``quantization/__init__.py`` line 40: ``QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))``.
* vllm 0.20.2 ``vllm/engine/arg_utils.py`` line 196: ``kwarg = "metavar" if contains_type(type_hints, str) else
  "choices"``; ``vllm/config/cache.py`` line 18: ``CacheDType = Literal[...]``.
* sglang 0.5.1 ``sglang/srt/server_args.py`` line 1364: ``ATTN_BACKENDS = [...]`` bound inside add_cli_args; 0.5.14
  line 575: ``quantization: A[Optional[str], Arg(help=..., choices=QUANTIZATION_CHOICES)]``.
"""

from __future__ import annotations

from tools.engine_flags.choices import ANY
from tools.engine_flags.sglang_server_flags import server_choices
from tools.engine_flags.vllm_serve_flags import ARG_UTILS, serve_choices

QUANT = "vllm/model_executor/layers/quantization/__init__.py"

OLD_ARG_UTILS = '''
from vllm.config import LoadFormat
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument('--load-format', type=str, choices=[f.value for f in LoadFormat])
        parser.add_argument('--dtype', type=str, choices=['auto', 'half', 'bfloat16'])
        parser.add_argument('--kv-cache-dtype', type=str, choices=['auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3'])
        parser.add_argument('--quantization', '-q', type=nullable_str, choices=[*QUANTIZATION_METHODS, None])
'''
OLD_CONFIG = '''
import enum
class LoadFormat(str, enum.Enum):
    AUTO = "auto"
    PT = "pt"
'''
NEW_ARG_UTILS = '''
def literal_to_kwargs(type_hints):
    kwarg = "metavar" if contains_type(type_hints, str) else "choices"

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        cache_kwargs = get_kwargs(CacheConfig)
        load_kwargs = get_kwargs(LoadConfig)
        model_group.add_argument("--dtype", **model_kwargs["dtype"])
        model_group.add_argument("--quantization", "-q", **model_kwargs["quantization"])
        load_group.add_argument("--load-format", **load_kwargs["load_format"])
        cache_group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
'''
NEW_CONFIG = '''
from typing import TYPE_CHECKING, Any, Literal
if TYPE_CHECKING:
    from vllm.model_executor.layers.quantization import QuantizationMethods
    from vllm.model_executor.model_loader import LoadFormats
else:
    QuantizationMethods = Any
    LoadFormats = Any
ModelDType = Literal["auto", "half", "bfloat16"]
CacheDType = Literal["auto", "fp8", "fp8_e4m3"]

class ModelConfig:
    dtype: ModelDType | torch.dtype = "auto"
    quantization: QuantizationMethods | str | None = None

class CacheConfig:
    cache_dtype: CacheDType = "auto"

class LoadConfig:
    load_format: str | LoadFormats = "auto"
'''
NEW_QUANT = '''
QuantizationMethods = Literal["awq", "fp8", "mxfp4"]
QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))
'''


def test_vllm_argparse_choices_of_the_0_6_lines() -> None:
    sources = {ARG_UTILS: OLD_ARG_UTILS, "vllm/config.py": OLD_CONFIG, QUANT: 'QUANTIZATION_METHODS = ["awq", "fp8"]'}
    assert serve_choices(sources) == {
        "--load-format": ["auto", "pt"],
        "--dtype": ["auto", "half", "bfloat16"],
        "--kv-cache-dtype": ["auto", "fp8", "fp8_e5m2", "fp8_e4m3"],
        "--quantization": ["awq", "fp8"],  # None dropped: no pasted word is it
    }


def test_vllm_get_kwargs_fields_literal_metavar_and_any() -> None:
    sources = {ARG_UTILS: NEW_ARG_UTILS, "vllm/config/__init__.py": NEW_CONFIG, QUANT: NEW_QUANT}
    assert serve_choices(sources) == {
        "--dtype": ["auto", "bfloat16", "half"],  # a Literal: choices, sorted as literal_to_kwargs sorts them
        "--kv-cache-dtype": ["auto", "fp8", "fp8_e4m3"],
        # Any at run time: no choices; the names ModelConfig checks after parsing beside the "*"
        "--quantization": ["awq", "fp8", "mxfp4", ANY],
        "--load-format": [ANY],  # str | Any: a free string
    }


def test_sglang_choices_from_a_function_s_own_list_and_from_a_dataclass_field() -> None:
    server_args = '''
QUANTIZATION_CHOICES = ["awq", "fp8", "mxfp4"]

class ServerArgs:
    quantization: A[Optional[str], Arg(help="The quantization method.", choices=QUANTIZATION_CHOICES)] = None
    dtype: A[str, "Data type."] = "auto"

    @staticmethod
    def add_cli_args(parser):
        ATTN_BACKENDS = ["triton", "fa3"]
        parser.add_argument("--attention-backend", type=str, choices=ATTN_BACKENDS)
        parser.add_argument("--kv-cache-dtype", type=str, choices=["auto", "fp8_e5m2"])
'''
    assert server_choices({"sglang/srt/server_args.py": server_args}) == {
        "--quantization": ["awq", "fp8", "mxfp4"],
        "--dtype": [ANY],  # a field with help alone: any value
        "--attention-backend": ["triton", "fa3"],
        "--kv-cache-dtype": ["auto", "fp8_e5m2"],
    }
