"""`gate view`: a local, read-only web application over the cards, the run journals, the books, the
freeze file and the worker registry. The command line composes its sources (`gate.cli.view`)."""
