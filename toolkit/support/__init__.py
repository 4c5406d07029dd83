"""What every layer above leans on: the error family, units and number rendering, machine
facts, the cache folder.
"""
