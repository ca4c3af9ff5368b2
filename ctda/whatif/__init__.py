"""What-if scenarios: change durations, re-time the calibrated model, compare runs."""
