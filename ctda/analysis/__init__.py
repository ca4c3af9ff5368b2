"""The critical path engine: dependency graph, calibrated weights, paths, attribution."""
