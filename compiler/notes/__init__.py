"""Human notes: scan, parse (frontmatter, markdown rules), Obsidian link resolution, the graph, note search.

The only package that imports markdown-it, python-frontmatter, PyYAML and networkx.
"""
