"""One module per memctl subcommand, each with `register(subparsers)`."""
