"""The errors a user sees as one line and exit status 2."""


class UsageError(Exception):
    """A mistake in how bench was called; its message is the one line the user sees."""


class ResultsError(UsageError):
    """A results file that cannot be used; the message is one line for the user."""


class WriteError(UsageError):
    """A file bench could not write (a full disk, a target that is not a regular file); nothing was half-written."""
