"""Whole jobs a person runs around a compile: check, watch, the sync cycle, setup.

Each is a short pipeline over the packages below (the compile itself is compiler.pipeline); the
CLI and the MCP server call these.
"""
