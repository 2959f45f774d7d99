"""The judgment store: a keyed Delta table of judgments (:mod:`.cache`, its index by key :mod:`.cache_index`),
a run's lease on its name and its claims on keys (:mod:`.lease`, :mod:`.claims`), upkeep (:mod:`.maintenance`),
the check and repair of a damaged table (:mod:`.verify`, :mod:`.damage`, :mod:`.repair`) and the former
format (:mod:`.legacy`)."""
