"""ctda benchmarks: the driver (:mod:`bench.run`), its suites, synthetic traces (:mod:`bench.replicate`)."""
