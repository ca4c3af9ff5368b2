"""Reading Kineto (PyTorch profiler) traces into a columnar :class:`~ctda.ingest.table.EventTable`.

The entry point is :func:`ctda.ingest.reader.read_trace`; :mod:`ctda.ingest.summary` reduces
a table to what ``ctda inspect`` shows.
"""
