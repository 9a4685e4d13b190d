"""The exceptions deepmerge raises. Each carries the one-line message the CLI prints after
``deepmerge: error:``, naming the file or option it is about.

Every one is a ``deepmerge.Error``; each is also the built-in exception it is a kind of, so code
that catches ``OSError`` or ``ValueError`` catches them too:

- ``FileError`` (``OSError``): a file could not be read or written; ``errno`` is set.
- ``FormatError`` (``ValueError``): a malformed file, or arrays that do not make a deep image
  (counts and offsets disagree, NaN depth, wrong dtype).
- ``UnsupportedError`` (a ``FormatError``): a valid file that uses what deepmerge does not read
  (a deep part in PIZ or HTJ2K, mip levels, a flat file where deep input is needed).
- ``UsageError`` (``ValueError``): options or inputs that do not fit together.
- ``BudgetError`` (a ``UsageError``): refused by the memory budget; a larger ``memory_budget``
  lets it run.
- ``GLError`` (``RuntimeError``): OpenGL could not be used (``backend="gl"``) or failed.

``Error`` itself is raised only for a bug in deepmerge.
"""


class Error(Exception):
    """A deepmerge error; the message is the CLI's one line."""


class FileError(Error, OSError):
    """A file could not be read or written."""


class FormatError(Error, ValueError):
    """A malformed file, or arrays that do not make a deep image."""


class UnsupportedError(FormatError):
    """A valid file that uses what deepmerge does not read."""


class UsageError(Error, ValueError):
    """Options or inputs that do not fit together."""


class BudgetError(UsageError):
    """Refused by the memory budget: a larger ``memory_budget`` lets it run."""


class GLError(Error, RuntimeError):
    """OpenGL could not be used or failed."""
