"""The base layer: errors, settings, the vault's paths, atomic file writes, the writer lock and the clock.

Every other package may import from here; nothing here imports from them.
"""
