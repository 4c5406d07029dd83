"""Repartition a checkpoint's state into a NEW checkpoint: plan, target layout, staging."""
