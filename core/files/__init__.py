"""Files: everything read from or written to disk, as data, within budgets.

Owns the plan file (:mod:`.planfile`), comparisons on disk (:mod:`.comparison`), model
folders (``config.json`` and safetensors headers, :mod:`.importer`), training configs of
other tools (:mod:`.runconfig`), measurement results (:mod:`.measurement`), reports
(:mod:`.report`) and the one atomic writer (:mod:`.fileio`). Nothing here runs code from a
file: no pickles, no YAML tags, no imports named by a config.
"""
