"""The `tbtriage` command line: one module per subcommand, each a thin shell over `tbtriage.analysis` and the app."""
