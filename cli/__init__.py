"""The `tdm` command line: one module per group of sub-commands, assembled in `cli.main`."""
