"""Is some key population growing without bound? The per-store history replay, trend fits,
saturation and recapture models.
"""
