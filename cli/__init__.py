"""The compact-bert command line."""
