"""The errors ``mssr_hf`` raises for bad input: a value, a file, a dataset or a package the run needs, found wrong
before the run trains or writes anything. Each message names the field, key, file or package, and the fix.

``mssr-hf`` prints these in one line (exit status 2); any other exception is a bug or an environment failure, and it
prints its full traceback. Each class also derives from the built-in exception a caller would catch for it
(``ValueError``, ``FileNotFoundError``, ``ModuleNotFoundError``).
"""

from __future__ import annotations

__all__ = ["InputError", "MissingFileError", "MissingPackageError"]


class InputError(ValueError):
    """Bad input: a configuration value, a task declaration or a dataset that the run cannot use."""


class MissingFileError(InputError, FileNotFoundError):
    """A file or folder the input names does not exist."""


class MissingPackageError(InputError, ModuleNotFoundError):
    """An optional package the input asks for is not installed; the message says what to ``pip install``."""
