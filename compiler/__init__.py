"""Engram Vault: a build-style knowledge compiler for an Obsidian vault."""

__version__ = "0.1.0"
