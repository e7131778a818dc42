"""The teacher (a Sentence Transformer) and the backends that run its transformer (torch, ONNX Runtime)."""
