"""Many checkpoints at once: the fleet list's rows and the Prometheus metric families."""
