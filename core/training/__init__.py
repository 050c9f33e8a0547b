"""Training memory and time: what one training step holds, phase by phase, and how long the run takes.

Owns the rules of a single training step: the activations each block keeps
(:mod:`.activations`, :mod:`.attention`), the optimizer's state (:mod:`.optimizer`), how
weights are stored (:mod:`.storage`), the two accountings that assemble them — the lesson's
four buckets (:mod:`.lesson`) and the detailed, phase-by-phase peak (:mod:`.detailed`) —, the
memory of every kind of rank (:mod:`.ranks`) and of each node's host (:mod:`.host`), and the
FLOPs and hours of the run (:mod:`.compute`). How a rank's share is cut is
:mod:`core.parallel`'s; this package asks it and never the other way round.
"""
