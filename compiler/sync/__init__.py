"""Memories between machines: export and import of chunks, transcript bridges, git, the sync monitor.
"""
