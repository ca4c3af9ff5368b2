"""Test suite for ctda (a package so helpers import as ``tests.<module>``)."""
