"""Whole jobs a person runs: the compile spine, check, the sync cycle, setup.

Each is a short pipeline over the packages below; the CLI and the MCP server call these.
"""
