"""Command-line interface: one module per command, all registered on one typer app."""
