"""What every subcommand shares: its parser, with the common options (--json, --help, the
connection settings), its help, its example and the function that runs it."""


def subcommand(sub, parents, name, help, description, example, run):
    """Add subcommand ``name`` to ``sub``; the caller adds its own arguments to the result."""
    p = sub.add_parser(name, help=help, description=description, epilog=example, parents=parents,
                       add_help=False, formatter_class=parents[0].formatter_class)
    p.set_defaults(run=run)
    return p
