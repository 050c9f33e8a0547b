"""The test suite. Every test (and ``python -m tests.golden``) sees no Hugging Face cache:
a Hub id a config or ``--model`` names is read from the local cache first
(:mod:`core.files.model_source`), and no figure may depend on what this machine has
downloaded. Tests that want a cache build one and point at it."""

import os
import tempfile

# A folder nothing creates: the cache "is not there".
os.environ["HF_HUB_CACHE"] = os.path.join(tempfile.gettempdir(), "vramplan-tests-no-hf-cache", str(os.getpid()))
