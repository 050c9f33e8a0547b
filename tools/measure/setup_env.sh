#!/usr/bin/env bash
# Create (idempotently) the measurement virtualenv at <repo>/.venv-measure.
# torch==2.13.0 is pinned exactly: that is the local CPU build; any other spec
# would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv-measure/bin/python ]; then
    python3 -m venv .venv-measure
fi
if ! .venv-measure/bin/python -c "import torch, transformers, peft, safetensors; assert torch.__version__.startswith('2.13.0')" 2>/dev/null; then
    .venv-measure/bin/pip install torch==2.13.0 transformers peft safetensors
fi
.venv-measure/bin/python -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)"
