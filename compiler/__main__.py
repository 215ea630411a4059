"""`python -m compiler`: the `engram` command without the console script."""

from compiler.cli.main import main

main()
