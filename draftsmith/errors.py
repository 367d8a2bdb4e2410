"""User-facing errors: the CLI prints these as one clear line instead of a traceback."""


class DraftsmithError(Exception):
    """A problem with the user's input or environment that they can fix."""
