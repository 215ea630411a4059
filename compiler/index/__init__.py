"""The stores and their scoring: the embedding cache, token vectors and late interaction, the vector stores (flat, Chroma) and the keyword store (SQLite FTS5).

Above compiler.embed: the caches fill themselves through an embedder. The only package that
imports chromadb or threadpoolctl.
"""
