"""Ray start-up, resources and actor-pool sizing: the only package that knows about Ray clusters."""
