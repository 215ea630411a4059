"""The compile pipeline: the spine that runs the stages in order, its stages (parse, embed and index, graph, memory), and the build state that lets the next compile redo only what changed.

Below the commands: `engram compile` is the spine, and `engram check`, `engram watch` and the
sync cycle read its state or run it.
"""
