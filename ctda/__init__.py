"""ctda: cross-thread dependency-aware critical path analysis for PyTorch profiler traces."""

__version__ = "0.1.0"
