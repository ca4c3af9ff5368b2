"""Rendering of analysis results (rich tables, Markdown, JSON); no analysis here."""
