"""The `engram` command: thin click adapters over the library, one error handler (cli/common.py).

Imports anything below it; nothing imports it. The only package that imports click.
"""
