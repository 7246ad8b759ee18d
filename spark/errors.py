"""The one error a post-mortem raises for input it cannot analyse."""

from __future__ import annotations


class BadInputError(Exception):
    """The run cannot be analysed: a missing directory, an unreadable journal, an unknown schema version.

    The CLI turns it into exit status 2 with the message, which always names the file at fault."""
