"""Exceptions: each negative errno of the C library maps to one class.

Every class derives from :class:`rdmamsg.Error` (an :class:`OSError`) and
from the built-in exception Python itself uses for that errno
(``ConnectionRefusedError`` for ``ECONNREFUSED``, ``TimeoutError`` for
``ETIMEDOUT``, ``BlockingIOError`` for ``EAGAIN`` ...), so both
``except rdmamsg.Error`` and ``except ConnectionRefusedError`` work.  The
message is the library's ``rdmamsg_strerror()`` text.
"""
from __future__ import annotations

import errno as _errno
import os as _os
from typing import Dict, Optional, Type

from ._ffi import ffi, lib


class Error(OSError):
    """Base of every error the C library reports (``errno`` is positive)."""


class InvalidArgument(Error, ValueError):
    """EINVAL: an argument the library refused."""


class MessageTooLarge(Error, ValueError):
    """EMSGSIZE: larger than the connection (or the pool) allows."""


class NotConnected(Error, ConnectionError):
    """ENOTCONN: the endpoint is not (or no longer) connected."""


class OperationCanceled(Error):
    """ECANCELED: the operation was cancelled, usually by a close."""


class ProtocolError(Error, ConnectionError):
    """EPROTO: the peer speaks another protocol (version) or broke it."""


class HostUnreachable(Error, ConnectionError):
    """EHOSTUNREACH: the address cannot be resolved to an RDMA device."""


class NoDevice(Error):
    """ENODEV: no RDMA device (or softrdma library) there."""


class NotSupported(Error):
    """ENOTSUP: the device lacks the capability."""


class OutOfMemory(Error, MemoryError):
    """ENOMEM / ENOBUFS: out of memory or pool space."""


class RemoteIOError(Error):
    """EREMOTEIO: the peer's device reported an error."""


def _sub(name: str, base: Type[BaseException]) -> Type[Error]:
    doc = "%s from rdmamsg (also a %s)." % (name, base.__name__)
    return type(name, (Error, base), {"__doc__": doc, "__module__": __name__})


ConnectionRefused = _sub("ConnectionRefused", ConnectionRefusedError)
ConnectionReset = _sub("ConnectionReset", ConnectionResetError)
ConnectionAborted = _sub("ConnectionAborted", ConnectionAbortedError)
TimedOut = _sub("TimedOut", TimeoutError)
WouldBlock = _sub("WouldBlock", BlockingIOError)
Busy = _sub("Busy", BlockingIOError)
AddressInUse = _sub("AddressInUse", OSError)
AccessDenied = _sub("AccessDenied", PermissionError)
NotFound = _sub("NotFound", LookupError)
AlreadyClosing = _sub("AlreadyClosing", OSError)
OutOfRange = _sub("OutOfRange", ValueError)
NoSpace = _sub("NoSpace", OSError)
BrokenPipe = _sub("BrokenPipe", BrokenPipeError)
AddressNotAvailable = _sub("AddressNotAvailable", OSError)
#: ENETDOWN: the device port a connection (or its attempt) used went down
NetworkDown = _sub("NetworkDown", ConnectionError)

# errno -> class; anything else becomes a plain Error.
ERRNO_CLASSES: Dict[int, Type[Error]] = {
    _errno.EINVAL: InvalidArgument,
    _errno.EMSGSIZE: MessageTooLarge,
    _errno.ENOTCONN: NotConnected,
    _errno.ECANCELED: OperationCanceled,
    _errno.EPROTO: ProtocolError,
    _errno.EHOSTUNREACH: HostUnreachable,
    _errno.ENODEV: NoDevice,
    _errno.ENOTSUP: NotSupported,
    _errno.ENOMEM: OutOfMemory,
    _errno.ENOBUFS: OutOfMemory,
    _errno.EREMOTEIO: RemoteIOError,
    _errno.ECONNREFUSED: ConnectionRefused,
    _errno.ECONNRESET: ConnectionReset,
    _errno.ECONNABORTED: ConnectionAborted,
    _errno.ETIMEDOUT: TimedOut,
    _errno.EAGAIN: WouldBlock,
    _errno.EBUSY: Busy,
    _errno.EADDRINUSE: AddressInUse,
    _errno.EACCES: AccessDenied,
    _errno.EPERM: AccessDenied,
    _errno.ENOENT: NotFound,
    _errno.EALREADY: AlreadyClosing,
    _errno.ERANGE: OutOfRange,
    _errno.ENOSPC: NoSpace,
    _errno.EPIPE: BrokenPipe,
    _errno.EADDRNOTAVAIL: AddressNotAvailable,
    _errno.ENETDOWN: NetworkDown,
}


def strerror(rc: int) -> str:
    """The library's text for a return value (0 or a negative errno)."""
    return ffi.string(lib.rdmamsg_strerror(rc)).decode("utf-8", "replace")


def make_error(rc: int, what: Optional[str] = None) -> Error:
    """The exception for a negative return value ``rc`` of call ``what``."""
    err = -rc if rc < 0 else rc
    cls = ERRNO_CLASSES.get(err, Error)
    text = strerror(-err)
    if text == "unknown error" and err:  # not one the library words itself
        text = _os.strerror(err)
    if what:
        text = "%s: %s" % (what, text)
    return cls(err, text)


def check(rc: int, what: Optional[str] = None) -> int:
    """Raise the mapped exception for a negative ``rc``; return it otherwise."""
    if rc < 0:
        raise make_error(rc, what)
    return rc


class EndOfStream(EOFError):
    """recv() after the peer closed the connection and every message it
    sent was read (``async for`` ends instead)."""


__all__ = sorted(n for n, v in list(globals().items())
                 if isinstance(v, type) and issubclass(v, BaseException)
                 and v.__module__ == __name__)
