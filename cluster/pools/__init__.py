"""Judge pools: long-lived engines in Ray actors (:mod:`.judge_pool`), the calls forwarded to them and their
bookkeeping (:mod:`.forwarding`, :mod:`.monitor`), where they go (:mod:`.placement`), how they grow and shrink
(:mod:`.scaling`), and pools kept warm between the jobs of one driver (:mod:`.warm`)."""
