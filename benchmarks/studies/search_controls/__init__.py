"""Does the learned search earn its keep? (issue #27)."""
