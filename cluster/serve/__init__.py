"""``pairank serve`` on Ray Serve: its deployments (:mod:`.deployments`) and the judge replica's batching and group
commit (:mod:`.batching`); what the endpoints do is :mod:`pairank.jobs.serve`."""
