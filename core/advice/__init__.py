"""Advice: what to change when a plan does not fit, how far it goes, and how plans compare.

Everything here is produced by estimating modified plans with :func:`core.estimate.estimate`,
never by arithmetic of its own: the diagnosis (:mod:`.diagnosis`), the remedies for training
and serving (:mod:`.remedies`, :mod:`.serving_remedies`), the largest micro-batch and
sequence that fit (:mod:`.limits`), the symptom table (:mod:`.symptoms`), which cards and how
few GPUs fit (:mod:`.fit`), and side-by-side comparisons (:mod:`.compare`).
"""
