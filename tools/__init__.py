"""Developer tools (not part of the app)."""
