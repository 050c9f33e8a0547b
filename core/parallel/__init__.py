"""Multi-GPU parts of the estimate: how ranks are laid out, what each holds, what they exchange."""
