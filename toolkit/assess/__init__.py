"""One assessment of a checkpoint, computed once and rendered by every surface.
"""
