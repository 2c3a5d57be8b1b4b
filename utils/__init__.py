"""Development tools of the compact-bert repository (not part of the installed package), run from the checkout."""
