"""The main job's errors and how it names files in its messages."""
import os

# Exit statuses of `python -m fastmog`, documented in its --help epilog.
EXIT_OK = 0
EXIT_USAGE = 2          # a mistake in the command, its input or its outputs
EXIT_SHORT = 3          # the input ended before the frame count its container announces
EXIT_INCOMPLETE = 4     # several sources: a worker was lost, or a source failed
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGTERM, SIGHUP: 128 + signal, _signals); what was written is kept


class UserError(Exception):
    """A mistake the user can fix: reported as one line, exit status 2."""


def shown(path):
    """`path` as printable text: bytes that are not UTF-8 appear as \\xNN escapes
    (printing the raw surrogates would raise UnicodeEncodeError)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
