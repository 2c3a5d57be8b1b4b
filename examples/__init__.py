"""Small end-to-end recipes that reproduce the numbers in the README."""
