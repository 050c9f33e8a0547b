"""Multi-GPU plans: where the model and the batch sit (:mod:`.layout`), what each rank
holds (:mod:`.state`, :mod:`.acts`), the memory of every kind of rank (:mod:`.memory`)
and of the host (:mod:`.host`), and what the ranks exchange each step (:mod:`.comm`)."""
