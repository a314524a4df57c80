"""The results package: the run store, CSV and HTML writers, the index, and serving."""
