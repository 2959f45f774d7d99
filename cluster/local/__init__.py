"""A Ray cluster of several nodes on this machine (``pairank cluster up``): the nodes (:mod:`.nodes`) and what each
is given before its ``ray start`` (:mod:`.node_setup`)."""
