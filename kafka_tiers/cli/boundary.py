"""The ``kafka-tiers`` command's one error boundary: what reaches the user when a command fails.

Guarantees (for everything :func:`run` calls):

- an expected error (bad input, a missing file, an unreachable broker, a plugin that does not
  load: a :class:`~kafka_tiers.api.KafkaTiersError`, a click usage error or
  :class:`click.ClickException`, an :class:`OSError`) is one line ``error: <message>`` on
  stderr and exit status :data:`EXIT_ERROR` (2);
- any other exception is a bug: one line ``internal error: <type>: <message>; run with --debug
  for the traceback`` and exit status :data:`EXIT_INTERNAL` (3);
- a traceback is printed only in debug mode (``kafka-tiers --debug ...`` or
  ``KAFKA_TIERS_DEBUG=1``), then in full (causes included), followed by the same line and the
  same exit status;
- stdout is flushed before the exit status is returned: output that cannot be written (a
  full disk: ``> /dev/full``) is an ``error:`` line and :data:`EXIT_ERROR`, never a silent
  exit 0 (a reader gone away, ``| head``, stays a quiet exit 0);
- Ctrl-C (``KeyboardInterrupt``, click's ``Abort``) exits :data:`EXIT_INTERRUPTED` (130)
  without a traceback;
- every line is one printable line: the values of live secrets
  (:class:`~kafka_tiers.api.Secret`) are replaced by ``<hidden>``, newlines and other control
  characters are escaped, and undecodable bytes of the command line (which Python keeps as
  surrogates) are shown as ``\\xNN``. The debug traceback has its secrets hidden too.

A command's own "no" (``remote verify`` found a broken segment, a reassignment is not done) is
exit status :data:`EXIT_NEGATIVE` (1), set by the command, never by this boundary.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

EXIT_OK = 0  #: the command did what was asked
EXIT_NEGATIVE = 1  #: the command ran and its answer is "no" (it says which)
EXIT_ERROR = 2  #: an expected error: one ``error:`` line (usage errors included)
EXIT_INTERNAL = 3  #: a bug in kafka-tiers or a plugin: one ``internal error:`` line
EXIT_INTERRUPTED = 130  #: Ctrl-C (128 + SIGINT)

#: click's "a group was called without a subcommand" (click >= 8.2), shown as the help
_NO_ARGS_IS_HELP: tuple[type[click.UsageError], ...] = tuple(
    c for c in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if c is not None)

DEBUG_ENV = "KAFKA_TIERS_DEBUG"  #: ``1`` turns debug mode on, as ``--debug`` does


def _hide(text: str) -> str:
    from kafka_tiers.api.secret import Secret

    return Secret.hide(text) if Secret.any_live() else text


def one_line(text: str) -> str:
    """``text`` as one printable line: live secrets hidden, line breaks and other control
    characters escaped (``\\n``, ``\\x1b``), lone surrogates (undecodable command-line bytes
    under ``surrogateescape``) shown as the byte they stand for (``\\xff``)."""
    out = []
    for ch in _hide(text.strip()):
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append(" ")
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)


def expected_message(exc: BaseException) -> str | None:
    """The message of an expected error, or None when ``exc`` is not one (a bug)."""
    from kafka_tiers.api.errors import KafkaTiersError

    if isinstance(exc, click.UsageError):
        hint = ""
        if exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        return exc.format_message() + hint
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if isinstance(exc, KafkaTiersError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc) or type(exc).__name__
        names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if n is not None]
        return f"{' -> '.join(names)}: {what}" if names else what
    return None


def _stderr(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed: nothing left to tell
        click.echo(line, err=True)


def _traceback(exc: BaseException) -> None:
    _stderr(_hide("".join(traceback.format_exception(exc))).rstrip("\n"))


def report(exc: BaseException, debug: bool) -> int:
    """Print what ``exc`` means for the user (see the module docstring) and return the exit
    status."""
    if isinstance(exc, KeyboardInterrupt | click.exceptions.Abort):
        return EXIT_INTERRUPTED
    if isinstance(exc, click.UsageError) and isinstance(exc, _NO_ARGS_IS_HELP):
        with contextlib.suppress(OSError, ValueError):  # a group without its subcommand
            exc.show()  # its help
        return EXIT_ERROR
    message = expected_message(exc)
    if debug:
        _traceback(exc)
    if message is not None:
        _stderr(f"error: {one_line(message)}")
        return EXIT_ERROR
    detail = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    hint = "" if debug else "; run with --debug for the traceback"
    _stderr(f"internal error: {detail}{hint}")
    return EXIT_INTERNAL


class StdoutClosedError(BrokenPipeError):
    """The reader of stdout went away; stdout already points at /dev/null."""


class PipeClosed(Exception):
    """A :class:`BrokenPipeError` carried past click (which would turn any ``EPIPE`` into a
    silent exit 1) to :func:`run`, which tells stdout's end from another pipe's."""

    def __init__(self, error: BrokenPipeError) -> None:
        super().__init__(str(error))
        self.error = error


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader went away (a broken pipe elsewhere, a broker's
    socket say, is an error to report, not the end of the output)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor to ask
        return False


def _quiet_broken_pipe() -> None:
    """stdout's reader went away (``kafka-tiers ... | head``): point stdout at /dev/null so the
    interpreter's final flush does not fail again."""
    # no real file descriptor (a test's capture): nothing to redirect
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def echo_undecodable_bytes() -> None:
    """Let stdout write back what the command line could not decode: Python hands such argv
    bytes over as lone surrogates (``surrogateescape``); a command that prints such an
    argument (a path, a topic) writes the original bytes instead of failing with
    ``UnicodeEncodeError``."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(Exception):  # a stream that cannot: leave it as it is
            reconfigure(errors="surrogateescape")


class OutputWriteError(OSError):
    """Writing the command's output to stdout failed (a full disk, an I/O error)."""


def _flush_stdout() -> None:
    """Flush stdout: what a command printed but the buffer still holds is written now, so a
    write that fails (``ENOSPC`` on ``> /dev/full``) is reported like any error instead of
    being lost at exit.

    Raises:
        BrokenPipeError: stdout's reader went away (the quiet exit 0 of ``| head``).
        OutputWriteError: any other failed write.
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        if isinstance(exc, ValueError):  # stdout closed by the command: nothing to flush
            return
        _quiet_broken_pipe()  # the interpreter's final flush must not fail again
        raise OutputWriteError(exc.errno, f"cannot write the output to stdout: "
                                          f"{exc.strerror or exc}") from None


def _flushed_or(code: int, debug: Callable[[], bool]) -> int:
    """``code`` once stdout is flushed; a failed flush is reported and ends as
    :data:`EXIT_ERROR` (a broken pipe: exit 0, as ever)."""
    try:
        _flush_stdout()
    except BrokenPipeError:
        _quiet_broken_pipe()
        return code
    except OutputWriteError as exc:
        return report(exc, debug())
    return code


def run(invoke: Callable[[], Any], debug: Callable[[], bool]) -> int:
    """Call ``invoke`` (a click command's ``main`` with ``standalone_mode=False``) behind the
    boundary; return the exit status. ``debug()`` is asked only once something failed (the
    ``--debug`` flag is known only after the command line was parsed)."""
    echo_undecodable_bytes()
    try:
        code = invoke()
        _flush_stdout()  # a failed write of buffered output (a full disk) is an error too
    except click.exceptions.Exit as exc:
        if exc.exit_code == EXIT_OK:
            return _flushed_or(EXIT_OK, debug)
        return int(exc.exit_code)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return _flushed_or(int(exc.code or 0), debug)
        _stderr(f"error: {one_line(str(exc.code))}")
        return EXIT_ERROR
    except (BrokenPipeError, PipeClosed) as exc:
        error = exc.error if isinstance(exc, PipeClosed) else exc
        if isinstance(error, StdoutClosedError) or _stdout_gone():
            _quiet_broken_pipe()
            return EXIT_OK
        return report(error, debug())  # another pipe or socket (a broker's, a plugin's)
    except BaseException as exc:  # the boundary: every other exception is reported here
        if not isinstance(exc, Exception | KeyboardInterrupt | click.exceptions.Abort):
            raise  # GeneratorExit and the like are not ours to report
        return report(exc, debug())
    return int(code) if isinstance(code, int) else EXIT_OK


__all__ = ["DEBUG_ENV", "EXIT_ERROR", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NEGATIVE",
           "EXIT_OK", "OutputWriteError", "PipeClosed", "StdoutClosedError",
           "echo_undecodable_bytes", "expected_message", "one_line", "report", "run"]
