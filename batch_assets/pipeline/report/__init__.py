"""Report: a partition's figures, its HTML page, CSV exports and the tables' metadata."""
