"""The sweep's configuration: one cell, the grid of an experiment, the config files."""
