"""The MCP server (`engram serve`): tools over the memory library and note search, one error handler.

The only package that imports mcp.
"""
