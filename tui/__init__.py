"""tbtriage's terminal side: the Textual app, its widgets, and the command line."""
