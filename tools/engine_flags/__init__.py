"""Tools that read the engines' released code for the flag tables of core.files.launch."""
