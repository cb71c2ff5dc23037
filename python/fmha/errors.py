# SPDX-License-Identifier: MIT
"""Exceptions carrying the library's status name and its precise message."""


class FmhaError(Exception):
    """A call into libfmha failed. `status` is the status name ("INVALID_PROBLEM", ...),
    `message` the library's text (it names the rule, what was found and what was expected)."""

    def __init__(self, status, message):
        self.status = status
        self.message = message
        super().__init__("%s: %s" % (status, message))


class InvalidProblemError(FmhaError, ValueError):
    """The problem broke a validation rule (the message starts with "[rule <id>]")."""


class NotSupportedError(FmhaError):
    """No kernel of this build and device runs the problem (the message says why)."""


class NotCompiledError(NotSupportedError):
    """A feature or backend this build or machine lacks (no CUDA driver, no NVRTC)."""


_BY_STATUS = {
    "INVALID_PROBLEM": InvalidProblemError,
    "OUT_OF_RANGE": InvalidProblemError,
    "NOT_SUPPORTED": NotSupportedError,
    "NOT_COMPILED": NotCompiledError,
    "ARCH_MISMATCH": NotSupportedError,
}


def error_for_status(status, message):
    return _BY_STATUS.get(status, FmhaError)(status, message)
