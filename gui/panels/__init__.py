"""Read-only panels that redraw from each Estimate."""
