"""asyncio integration of rdmamsg: contexts, endpoints, listeners, memory.

One context is driven by the event loop it was made in: its fd sits under
``loop.add_reader()``; when it is readable the context runs
``rdmamsg_ctx_progress()`` and then ``rdmamsg_ctx_arm()`` until that returns
0 (``-EBUSY`` means work is pending: progress again), so the loop only ever
blocks when the library said the fd will wake it (one C call,
``_rdmamsg_py_pump`` of rdmamsg_build.py).  A call made from a coroutine (a send, a close ...) asks
``rdmamsg_ctx_arm()`` whether it left work behind that the fd will not
announce; only then it schedules one such pass with ``loop.call_soon()``
(one per task step, however many calls), which runs before the loop next
blocks.  No thread, no busy loop, no lost wake-up.

The C objects belong to the loop's thread; so do these Python objects: a
call from another loop or thread raises RuntimeError before it reaches the
library (_check_own), and an object collected in another thread is closed
from the loop's.
"""
from __future__ import annotations

import asyncio
import contextvars
import errno as _errno
import inspect
import atexit
import enum
import itertools
import logging
import fcntl
import math
import mmap
import os
import struct
import sys
import threading
import traceback
import warnings
import weakref
from collections import deque
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict,
                    NamedTuple,
                    Optional, Set, Tuple, Union)

from ._errors import (EndOfStream, NotConnected, OperationCanceled, check,
                      make_error)
from ._ffi import ffi, lib

__all__ = [
    "Context", "Endpoint", "Listener", "Server", "Message", "Request",
    "PoolBuffer", "MemoryRegion", "RemoteRegion", "SharedReceiveQueue",
    "SrqStats", "Group", "GroupMessage", "GroupLoss", "GroupStats",
    "connect", "listen", "join", "start_server", "get_context",
    "set_log_level", "log_to_logging",
    "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE", "ACCESS_REMOTE_ATOMIC",
    "MAX_PATHS", "PathEvent", "PathEventType", "PathStats", "Protocols",
    "DcStats", "IOV_MAX", "BusyPollStats",
]

BufferLike = Any  # any object with the buffer protocol (C-contiguous)

ACCESS_REMOTE_READ: int = lib.RDMAMSG_ACCESS_REMOTE_READ
ACCESS_REMOTE_WRITE: int = lib.RDMAMSG_ACCESS_REMOTE_WRITE
ACCESS_REMOTE_ATOMIC: int = lib.RDMAMSG_ACCESS_REMOTE_ATOMIC
PRIVATE_DATA_MAX: int = lib.RDMAMSG_PRIVATE_DATA_MAX
MR_EXPORT_SIZE: int = lib.RDMAMSG_MR_EXPORT_SIZE
RECV_IMM: int = lib.RDMAMSG_RECV_IMM
RECV_LARGE: int = lib.RDMAMSG_RECV_LARGE
#: Most addresses of one connect (an address list, see connect()).
MAX_PATHS: int = lib.RDMAMSG_MAX_PATHS
#: Most pieces of one Endpoint.sendv().
IOV_MAX: int = lib.RDMAMSG_IOV_MAX

_EBUSY = -_errno.EBUSY
_c_pump = lib._rdmamsg_py_pump
_c_send = lib._rdmamsg_py_send
_c_sent = lib._rdmamsg_py_sent
_c_request = lib._rdmamsg_py_request
_c_respond = lib._rdmamsg_py_respond
_NULL = ffi.NULL
_EAGAIN = -_errno.EAGAIN
_REFUSED = (_EAGAIN, None)  # a post not tried: earlier sends wait for room
#: Most progress calls of one pass of the pump (see Context._pump).
PUMP_ROUNDS = 64

#: Received messages of at least this many bytes stay in the library's pool
#: buffer (rdmamsg_recv_keep) and come as a memoryview over it; smaller ones
#: are copied, which is cheaper than tracking a buffer.
KEEP_THRESHOLD = 16384
#: Sends above the connection's eager maximum of at least this many bytes
#: register the caller's memory and go by rendezvous without any copy
#: (rdmamsg_send_mr); smaller large ones take rdmamsg_send_large's one copy.
SEND_MR_THRESHOLD = 4 << 20

# Endpoint attributes: keyword -> (C setter, converter).  Timeouts are in
# seconds on the Python side.  New setters of the header go here (and in
# rdmamsg_build.py's tables).


def _ms(seconds: float) -> int:
    if seconds < 0:
        raise ValueError("a timeout cannot be negative")
    if seconds != seconds or seconds == math.inf:  # NaN, infinity
        raise make_error(-_errno.EINVAL, "timeout of %r seconds" % seconds)
    return int(math.ceil(seconds * 1000))


def _apm(value: Any) -> int:
    """apm=True/False: RDMAMSG_APM_AUTO or _OFF."""
    if not isinstance(value, bool):
        raise TypeError("apm must be True or False")
    return lib.RDMAMSG_APM_AUTO if value else lib.RDMAMSG_APM_OFF


_TRANSPORTS = {"rc": lib.RDMAMSG_TRANSPORT_RC, "dc": lib.RDMAMSG_TRANSPORT_DC}


def _transport(value: Any) -> int:
    """transport="rc" (the default) or "dc" (needs srq=)."""
    if not isinstance(value, str):
        raise TypeError("transport must be 'rc' or 'dc'")
    if value not in _TRANSPORTS:
        raise ValueError("transport must be 'rc' or 'dc', not %r" % value)
    return _TRANSPORTS[value]


_EP_ATTRS: Dict[str, Tuple[str, Callable[[Any], int]]] = {
    "connect_timeout": ("rdmamsg_ep_attr_set_connect_timeout", _ms),
    "close_timeout": ("rdmamsg_ep_attr_set_close_timeout", _ms),
    "peer_timeout": ("rdmamsg_ep_attr_set_peer_timeout", _ms),
    "recv_depth": ("rdmamsg_ep_attr_set_recv_depth", int),
    # the receive window grows to this while the peer uses it whole
    # (default 128 unless recv_depth= is given: then fixed)
    "recv_depth_max": ("rdmamsg_ep_attr_set_recv_depth_max", int),
    "send_depth": ("rdmamsg_ep_attr_set_send_depth", int),
    "send_backlog": ("rdmamsg_ep_attr_set_send_backlog", int),
    "eager_size": ("rdmamsg_ep_attr_set_eager_size", int),
    "max_msg_size": ("rdmamsg_ep_attr_set_max_msg_size", int),
    "max_large_size": ("rdmamsg_ep_attr_set_max_large_size", int),
    # rendezvous above this many bytes (the library's default 32 KiB)
    "rndv_threshold": ("rdmamsg_ep_attr_set_rndv_threshold", int),
    # "rc" or "dc" (the connecting side chooses; DC needs srq=)
    "transport": ("rdmamsg_ep_attr_set_transport", _transport),
    "linger": ("rdmamsg_ep_attr_set_linger", lambda v: int(bool(v))),
    # the accepting side's wait for a REPLAY connector's reconnect
    "session_linger": ("rdmamsg_ep_attr_set_session_linger", _ms),
    # automatic path migration where the device has it (both sides)
    "apm": ("rdmamsg_ep_attr_set_apm", _apm),
    # the QP's local ACK timeout, InfiniBand's exponent (0: the default)
    "ack_timeout": ("rdmamsg_ep_attr_set_ack_timeout", int),
}
# Endpoint options that are objects, not numbers (see _make_ep_attr);
# failover, on_path and reconnect_* are the connecting side's only (see
# _listen_core).
_EP_OBJS = ("srq", "recv_alloc", "failover", "on_path", "reconnect_timeout",
            "reconnect_tries")
# Options of a listener only (see connect).
_LISTEN_ONLY = ("session_linger",)

_FAILOVER = {"off": lib.RDMAMSG_FAILOVER_OFF,
             "reconnect": lib.RDMAMSG_FAILOVER_RECONNECT,
             "replay": lib.RDMAMSG_FAILOVER_REPLAY}
_POLICIES = "'off', 'reconnect' or 'replay'"

# rdmamsg_ep_attr_set_reconnect()'s defaults (rdmamsg.h): the one of the
# pair that is not given keeps its default.
_RECONNECT_TIMEOUT = 10.0
_RECONNECT_TRIES = 16
_UINT_MAX = 0xFFFFFFFF


def _failover(value: Any) -> int:
    """The C policy of connect(failover=...): "off", "reconnect" or
    "replay"."""
    if isinstance(value, str):
        if value not in _FAILOVER:
            raise ValueError("failover must be %s, not %r"
                             % (_POLICIES, value))
        return _FAILOVER[value]
    raise TypeError("failover must be %s" % _POLICIES)


def _reconnect(opts: Dict[str, Any]) -> Optional[Tuple[int, int]]:
    """(timeout_ms, tries) of reconnect_timeout= / reconnect_tries=, None
    when neither is given; they need failover="replay" (InvalidArgument
    otherwise), a timeout in seconds (1 ms .. 3,600 s) and a whole number
    of tries (1 .. 1,000; the C setter checks the ranges)."""
    timeout = opts.get("reconnect_timeout")
    tries = opts.get("reconnect_tries")
    if timeout is None and tries is None:
        return None
    policy = opts.get("failover")
    if policy is None or _failover(policy) != lib.RDMAMSG_FAILOVER_REPLAY:
        raise make_error(-_errno.EINVAL, "reconnect_timeout and "
                         "reconnect_tries need failover='replay'")
    if timeout is None:
        timeout = _RECONNECT_TIMEOUT
    if tries is None:
        tries = _RECONNECT_TRIES
    if isinstance(timeout, bool) or \
            not isinstance(timeout, (int, float)):
        raise TypeError("reconnect_timeout must be a number of seconds")
    if timeout != timeout or timeout in (math.inf, -math.inf):
        raise make_error(-_errno.EINVAL, "reconnect_timeout")
    if isinstance(tries, bool) or not isinstance(tries, int):
        raise TypeError("reconnect_tries must be an int")
    ms = _ms(timeout)
    if ms > _UINT_MAX or not 0 <= tries <= _UINT_MAX:
        raise make_error(-_errno.EINVAL, "reconnect_timeout/tries")
    return ms, tries


class PathEventType(enum.IntEnum):
    """What a path event reports (enum rdmamsg_path_event)."""
    PATH_DOWN = lib.RDMAMSG_PATH_DOWN              # the path failed
    FAILOVER_START = lib.RDMAMSG_FAILOVER_START    # trying this path next
    FAILOVER_DONE = lib.RDMAMSG_FAILOVER_DONE      # connected on this path
    FAILOVER_FAILED = lib.RDMAMSG_FAILOVER_FAILED  # the last path failed too
    # apm=True: path is then the local device port in use
    PATH_MIGRATED = lib.RDMAMSG_PATH_MIGRATED      # moved to the alternate
    PATH_MIG_FAILED = lib.RDMAMSG_PATH_MIG_FAILED  # the alternate failed too


class PathEvent(NamedTuple):
    """One path event of a connect with ``failover="reconnect"``: event,
    the index of the path in the address list, and status (0, or the
    negative errno of PATH_DOWN and FAILOVER_FAILED)."""
    event: PathEventType
    path: int
    status: int

    @property
    def error(self) -> Optional[BaseException]:
        """The status as the exception it maps to (None for 0)."""
        return make_error(self.status) if self.status < 0 else None


class PathStats(NamedTuple):
    """What ``Endpoint.path_stats()`` reports (rdmamsg_ep_get_path_stats)."""
    npaths: int            # addresses given
    path: int              # the one in use (or tried last)
    path_downs: int        # PATH_DOWN events (and unresolvable entries)
    failovers: int         # FAILOVER_DONE events
    failover_fails: int    # FAILOVER_FAILED events
    last_failover_ns: int  # first path down to FAILOVER_DONE
    migrations: int        # PATH_MIGRATED events (apm=True)
    mig_fails: int         # PATH_MIG_FAILED events
    apm: bool              # an alternate path is loaded
    attempts: int          # connect attempts after a failure
    #                        (FAILOVER_START events)


class Protocols(NamedTuple):
    """The sizes at which a connection's sends change protocol
    (``Endpoint.protocols``, rdmamsg_ep_get_protocols)."""
    max_inline: int      # up to this: inline
    eager: int           # up to this: one send from a pool buffer
    rndv_threshold: int  # up to this: fragments; above: rendezvous
    max_msg: int         # the negotiated maximum message size
    max_large: int       # the largest send taken
    rndv_window: bool    # rendezvous sources go through memory windows


class DcStats(NamedTuple):
    """A context's DC resources and counters (``Context.dc_stats()``,
    rdmamsg_ctx_dc_stats)."""
    dcis: int            # DC initiators made (shared, per context)
    dcts: int            # DC targets made (one per port used)
    endpoints: int       # DC endpoints open
    qps: int             # QPs of the context's DC machinery
    tag_drops: int       # DC messages for no (or a stale) endpoint,
    #                      or not from its peer's DCIs
    dci_waits: int       # sends that waited for a free DCI
    dci_resets: int      # DCIs reset after an error
    key_violations: int  # wrong-key requests the DCT dropped


#: Tasks of coroutine path callbacks, held until they end.
_path_tasks: Set["asyncio.Future[Any]"] = set()

_FABRICS = {"auto": lib.RDMAMSG_FABRIC_AUTO, "verbs": lib.RDMAMSG_FABRIC_VERBS,
            "soft": lib.RDMAMSG_FABRIC_SOFT}

# Operations in flight (sends, requests, one-sided): id -> (future, keep).
# The id travels as the C op_ctx / req_arg; 0 means "nobody waits".
_ops: Dict[int, Tuple[Optional[asyncio.Future], Any]] = {}
_op_ids = itertools.count(1)

_live_contexts = 0


# ---------------------------------------------------------------------------
# Logging: the library's log function feeds the logger "rdmamsg".
# ---------------------------------------------------------------------------

logger = logging.getLogger("rdmamsg")
# the library's levels -> logging's (NOTICE has no peer: INFO)
_PY_LEVELS = {lib.RDMAMSG_LOG_ERROR: logging.ERROR,
              lib.RDMAMSG_LOG_WARNING: logging.WARNING,
              lib.RDMAMSG_LOG_NOTICE: logging.INFO,
              lib.RDMAMSG_LOG_INFO: logging.INFO,
              lib.RDMAMSG_LOG_DEBUG: logging.DEBUG}


def _log_error(exc_type: Any, exc: BaseException, tb: Any) -> None:
    pass  # logging reports its handlers' errors itself; never raise into C


@ffi.def_extern(onerror=_log_error)
def _py_log(level, func, msg):  # type: ignore
    # any thread (cffi holds the GIL for us); not re-entered by one thread
    pylevel = _PY_LEVELS.get(level, logging.ERROR)
    if logger.isEnabledFor(pylevel):
        logger.log(pylevel, "%s: %s", ffi.string(func).decode("utf-8",
                                                               "replace"),
                   ffi.string(msg).decode("utf-8", "replace"))


def _c_log_level(pylevel: int) -> int:
    if pylevel <= logging.DEBUG:
        return lib.RDMAMSG_LOG_DEBUG
    if pylevel <= logging.INFO:
        return lib.RDMAMSG_LOG_INFO
    if pylevel <= logging.WARNING:
        return lib.RDMAMSG_LOG_WARNING
    if pylevel <= logging.ERROR:
        return lib.RDMAMSG_LOG_ERROR
    return lib.RDMAMSG_LOG_DISABLED


def set_log_level(level: Union[int, str]) -> None:
    """Set the level of the logger "rdmamsg" and the library's own (which
    decides what the library formats at all): ``logging.DEBUG`` ...
    ``logging.CRITICAL`` (nothing from the library above ERROR), or a
    level name."""
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise TypeError("level must be a logging level (int or name)")
    if isinstance(level, str):
        num = logging.getLevelName(level.upper())
        if not isinstance(num, int):
            raise ValueError("unknown logging level %r" % level)
        level = num
    if level < 0:
        raise ValueError("a logging level cannot be negative")
    logger.setLevel(level)
    check(lib.rdmamsg_log_set_level(_c_log_level(level)),
          "rdmamsg_log_set_level")


def log_to_logging(enable: bool = True) -> None:
    """Route the library's messages to the logger "rdmamsg" (the default
    from import on; the library's level follows the logger's effective
    level then) or turn them off (the library logs nowhere)."""
    if enable:
        check(lib.rdmamsg_log_set_level(
            _c_log_level(logger.getEffectiveLevel())),
            "rdmamsg_log_set_level")
    lib._rdmamsg_py_log_route(1 if enable else 0)


log_to_logging(True)
# before the interpreter goes: a library destructor that logs after it
# must not call into Python
atexit.register(lib._rdmamsg_py_log_route, 0)


def live_contexts() -> int:
    """How many C contexts this process holds (for leak checks)."""
    return _live_contexts


def _report(exc: BaseException, what: str) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        return
    loop.call_exception_handler({"message": what, "exception": exc})


def _cb_error(exc_type: Any, exc: BaseException, tb: Any) -> None:
    """onerror of the callbacks from C: an exception goes to the loop's
    exception handler; a KeyboardInterrupt or SystemExit leaves the pass
    once the progress call is done (_late_exc), as from _deliver."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        _late_exc.append(exc)
        return
    _report(exc, "exception in an rdmamsg callback")


_running_loop = asyncio.events._get_running_loop


def _check_own(ctx: "Context") -> None:
    """Refuse (RuntimeError) a call from another event loop than ctx's, or
    from another thread than ctx's while no loop runs there: the C objects
    belong to the thread that drives the context, and the binding's
    futures to its loop.  Called before anything reaches the library."""
    loop = _running_loop()
    if loop is ctx._loop:
        return
    if loop is None and threading.get_ident() == ctx._thread:
        return
    raise RuntimeError("rdmamsg: the objects of a context belong to the "
                       "event loop it was made in (%r%s); called from "
                       "another loop or thread"
                       % (ctx._loop, ", closed since" if ctx._loop.is_closed()
                          else ""))


def _own_thread(ctx: "Context") -> bool:
    """Whether a __del__ running now may call into C for ctx's objects
    (else it hands the close to the loop's thread)."""
    loop = _running_loop()
    return loop is ctx._loop or (loop is None and
                                 threading.get_ident() == ctx._thread)


def _close_later(ctx: "Context", fn: Callable[..., Any], *args: Any) -> None:
    """fn(*args) -- the close of a collected object -- now in ctx's thread,
    else from its loop (call_soon_threadsafe); nothing once it is closed."""
    if _own_thread(ctx):
        fn(*args)
    elif not ctx._loop.is_closed():
        try:
            ctx._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # closed meanwhile
            pass


#: Busy polling of contexts made without busy_poll=, in seconds (0: off).
#: See Context.busy_poll.
BUSY_POLL = 0.0
#: The longest busy_poll (one second).
BUSY_POLL_MAX = 1.0


def _spin_ns(seconds: Any) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("busy_poll must be a number of seconds")
    if not 0 <= seconds <= BUSY_POLL_MAX:  # NaN too
        raise ValueError("busy_poll must be 0 to %g seconds" % BUSY_POLL_MAX)
    return int(seconds * 1e9)


class BusyPollStats(NamedTuple):
    """What ``Context.busy_poll_stats()`` reports."""
    spins: int  # spins started
    hits: int   # spins that ended with work for Python
    polls: int  # progress calls made spinning
    skips: int  # chances to spin skipped by the backoff


#: Wake a task waiting for a message or a completion right inside the
#: context's progress pass (see _Waiter) instead of one loop iteration later.
#: A tunable for comparisons (tools/bench-python.sh runs both); leave it on.
DIRECT_WAKE = True


class _Waiter:
    """What recv(), send() and the other awaits of an endpoint wait on: a
    minimal asyncio Future (a task awaits it as it awaits one) that a
    context's progress pass can complete *and run the waiting task's step
    in place*.

    asyncio's Future schedules its callbacks (the task's wake-up) with
    call_soon: a message that arrives in a pass wakes its reader one loop
    iteration later, after the pass armed the context's fd, so the reader's
    answer goes out only then, and the peer's next message finds the loop
    asleep in epoll (a thread hand-off in the fabric).  Woken in the pass,
    the task runs up to its next await before the pass arms: the answer
    goes out at once, and a reply that is already there is taken by the
    same pass -- what Protocol-style callbacks (set_receiver) get.

    The task's step runs in place only where no task is running: inside
    the context's pass (a plain loop callback) and not inside another step
    run in place; everywhere else (a close from a task, a second wake-up
    during a step) the wake-up goes through call_soon as a Future's does.
    """
    __slots__ = ("_ctx", "_state", "_value", "_cbs",
                 "_asyncio_future_blocking")

    # _state: pending, done with a result (_value), cancelled, done with an
    # exception (_value); _value is set only when done
    _PENDING, _DONE, _CANCELLED, _FAILED = 0, 1, 2, 3

    def __init__(self, ctx: "Context") -> None:
        self._ctx = ctx
        self._state = 0
        # callbacks: None, (fn, context) -- the one of a waiting task, the
        # usual case -- or a list of them
        self._cbs: Any = None
        self._asyncio_future_blocking = False

    # -- the Future protocol that asyncio's Task uses ---------------------
    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._ctx._loop

    def done(self) -> bool:
        return self._state != 0

    def cancelled(self) -> bool:
        return self._state == 2

    def result(self) -> Any:
        st = self._state
        if st == 1:
            return self._value
        if st == 3:
            # handed over once (the waiting task's wake-up asks, and throws
            # it into the coroutine): kept here, it would close a cycle --
            # the awaiting frame holds this waiter, whose exception's
            # traceback holds that frame -- with the caller's buffer and
            # the binding's export of it in it, which the collector
            # cannot clear safely (a memoryview with an export)
            exc = self._value
            self._value = None
            try:
                raise exc
            finally:
                exc = None
        if st == 2:
            raise asyncio.CancelledError()
        raise asyncio.InvalidStateError("result is not set")

    def exception(self) -> Optional[BaseException]:
        st = self._state
        if st == 2:
            raise asyncio.CancelledError()
        if st == 0:
            raise asyncio.InvalidStateError("exception is not set")
        return self._value if st == 3 else None  # None once result() raised

    def add_done_callback(self, fn: Callable[[Any], Any], *,
                          context: Any = None) -> None:
        if context is None:
            context = contextvars.copy_context()
        cbs = self._cbs
        if self._state:
            self._ctx._loop.call_soon(fn, self, context=context)
        elif cbs is None:
            self._cbs = (fn, context)
        elif type(cbs) is tuple:
            self._cbs = [cbs, (fn, context)]
        else:
            cbs.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        cbs = self._cbs
        cbs = [] if cbs is None else [cbs] if type(cbs) is tuple else cbs
        keep = [c for c in cbs if c[0] != fn]
        self._cbs = keep or None
        return len(cbs) - len(keep)

    def cancel(self, msg: Any = None) -> bool:
        if self._state:
            return False
        self._state = 2
        self._run_cbs(False)
        return True

    def set_result(self, value: Any) -> None:
        if self._state:
            raise asyncio.InvalidStateError("already done")
        self._state = 1
        self._value = value
        self._run_cbs(True)

    def set_exception(self, exc: BaseException) -> None:
        if self._state:
            raise asyncio.InvalidStateError("already done")
        self._state = 3
        self._value = exc
        self._run_cbs(True)

    def _run_cbs(self, may_step: bool) -> None:
        cbs = self._cbs
        if cbs is None:
            return
        self._cbs = None
        ctx = self._ctx
        if may_step and ctx._in_pump and not ctx._stepping and DIRECT_WAKE:
            # after the progress call that woke it, before the pass arms:
            # a batch of messages then costs one step of the reader, not
            # one per message
            ctx._deferred.append((self, cbs))
            ctx._flagp[0] = 1
            return
        call_soon = ctx._loop.call_soon
        for fn, context in ([cbs] if type(cbs) is tuple else cbs):
            call_soon(fn, self, context=context)

    def __await__(self) -> Any:
        if not self._state:
            self._asyncio_future_blocking = True
            yield self
        if self._state == 1:
            return self._value
        if not self._state:
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__


def _buf_ptr(data: BufferLike) -> Tuple[Any, int]:
    """A pointer into data's own memory (no copy) and its size in bytes."""
    if data is None:
        raise TypeError("data must be a bytes-like object, not None")
    if isinstance(data, bytes):
        return ffi.from_buffer(data), len(data)
    p = ffi.from_buffer("char[]", data)
    return p, ffi.sizeof(p)


def _uint(v: Any, name: str) -> int:
    """An unsigned int argument: TypeError for a non-integer, ValueError
    outside 0..2**32-1 (the library checks its own range)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int" % name)
    if not 0 <= v < 1 << 32:
        raise ValueError("%s out of range" % name)
    return v


def _cstr(s: Any, name: str) -> bytes:
    """A str argument as the C string the library takes: TypeError for
    another type, ValueError for a NUL in it (C would stop there)."""
    if not isinstance(s, str):
        raise TypeError("%s must be a str" % name)
    if "\0" in s:
        raise ValueError("%s: embedded null character" % name)
    return s.encode()


def _one_addr(addr: Any) -> str:
    if isinstance(addr, tuple):
        host, port = addr
        addr = ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)
    if not isinstance(addr, str):
        raise TypeError("address must be 'host:port' or (host, port)")
    return addr


def _encode_addr(addr: Union[str, Tuple[str, int], list]) -> bytes:
    """'host:port', (host, port), or a list of them (a failover list,
    joined with commas as rdmamsg_connect() takes it)."""
    if isinstance(addr, list):
        if not addr:
            raise ValueError("an empty address list")
        parts = [_one_addr(a) for a in addr]
        for p in parts:
            if "," in p:
                raise ValueError("an entry of an address list has a comma: "
                                 "%r" % p)
        return _cstr(",".join(parts), "address")
    return _cstr(_one_addr(addr), "address")


# ---------------------------------------------------------------------------
# Callbacks from C.  Each runs inside Context._pump (rdmamsg_ctx_progress).
# ---------------------------------------------------------------------------

@ffi.def_extern(onerror=_cb_error)
def _py_on_connect(ep, status, reason, pdata, pdata_len, arg):  # type: ignore
    ffi.from_handle(arg)._on_connect(status, reason,
                                     ffi.buffer(pdata, pdata_len)[:]
                                     if pdata_len else b"")


@ffi.def_extern(onerror=_cb_error, error=-_errno.ENOBUFS)
def _py_recv_alloc(ep, length, datap, mrp, arg):  # type: ignore
    return ffi.from_handle(arg)._alloc(length, datap, mrp)


@ffi.def_extern(onerror=_cb_error)
def _py_on_srq_closed(srq, arg):  # type: ignore
    ffi.from_handle(arg)._on_closed()


@ffi.def_extern(onerror=_cb_error)
def _py_on_recv(ep, data, length, imm, flags, arg):  # type: ignore
    core = ffi.from_handle(arg)
    if length >= core.keep_threshold or flags & RECV_LARGE:
        core._on_recv(data, length, imm, flags)
        return
    # _EpCore._on_recv of a copied message, inlined (once per message)
    rcv = core.receiver
    if rcv is not None:
        rcv(memoryview(ffi.buffer(data, length)[:]),
            imm if flags & RECV_IMM else None)
        return
    # a plain message is queued as its bytes, alone (no tuple per message)
    core.queue.append(ffi.buffer(data, length)[:] if not flags
                      else (ffi.buffer(data, length)[:], imm, flags))
    waiters = core.recv_waiters
    while waiters:
        w = waiters.popleft()
        if not w.done():
            w.set_result(None)
            return


def _finish(opid: int, status: int, value: Any) -> None:
    entry = _ops.pop(opid, None)
    if entry is None:
        return
    fut, keep = entry
    if keep is not None and hasattr(keep, "_op_done"):
        keep._op_done()
    if fut is None or fut._state:  # fut: a _Waiter
        return
    if status < 0:
        fut.set_exception(make_error(status))
    else:  # set_result(value), inlined
        fut._state = 1
        fut._value = value
        if fut._cbs is not None:
            fut._run_cbs(True)


@ffi.def_extern(onerror=_cb_error)
def _py_on_send(ep, status, op_ctx, arg):  # type: ignore
    opid = int(ffi.cast("uintptr_t", op_ctx))
    if opid:
        _finish(opid, status, None)


@ffi.def_extern(onerror=_cb_error)
def _py_on_writable(ep, arg):  # type: ignore
    ffi.from_handle(arg)._on_writable()


@ffi.def_extern(onerror=_cb_error)
def _py_on_disconnect(ep, status, arg):  # type: ignore
    ffi.from_handle(arg)._on_disconnect(status)


@ffi.def_extern(onerror=_cb_error)
def _py_on_path(ep, event, path, status, arg):  # type: ignore
    ffi.from_handle(arg)._on_path(event, path, status)


@ffi.def_extern(onerror=_cb_error)
def _py_on_ep_closed(ep, arg):  # type: ignore
    ffi.from_handle(arg)._on_closed()


@ffi.def_extern(onerror=_cb_error)
def _py_on_request(ep, req, data, length, arg):  # type: ignore
    ffi.from_handle(arg)._on_request(req, ffi.buffer(data, length)[:])


@ffi.def_extern(onerror=_cb_error)
def _py_on_write_imm(ep, imm, length, arg):  # type: ignore
    ffi.from_handle(arg)._on_write_imm(imm, length)


@ffi.def_extern(onerror=_cb_error)
def _py_on_response(ep, status, data, length, req_arg):  # type: ignore
    opid = int(ffi.cast("uintptr_t", req_arg))
    _finish(opid, status, ffi.buffer(data, length)[:] if status == 0 else None)


@ffi.def_extern(onerror=_cb_error)
def _py_on_rma(ep, status, value, op_ctx):  # type: ignore
    opid = int(ffi.cast("uintptr_t", op_ctx))
    if opid:
        _finish(opid, status, int(value))


@ffi.def_extern(onerror=_cb_error)
def _py_on_conn_req(lst, req, pdata, pdata_len, arg):  # type: ignore
    ffi.from_handle(arg)._on_conn_req(req, ffi.buffer(pdata, pdata_len)[:]
                                      if pdata_len else b"")


#: batches delivered from inside a progress call (the arena was full, or
#: another callback came): for tests
_drains = [0]


@ffi.def_extern(onerror=_cb_error)
def _py_drain(b, n):  # type: ignore
    _drains[0] += 1
    _deliver(ffi.buffer(b.arena), n)


#: endpoints by their callbacks' arg (_EpCore.arg), for _deliver
_by_arg: Dict[int, "_EpCore"] = {}
_rec_unpack = struct.Struct("=QIIII").unpack_from


def _deliver(data: Any, n: int) -> None:
    """Deliver the n records of a pump's batch (rdmamsg_build.py: arg,
    length, immediate value, flags, kind, then the bytes, padded to 8),
    read in place from its arena (data, an ffi.buffer: nothing lands there
    until the C side is back), in order: a message as _py_on_recv would
    (to the endpoint's receiver, or to its queue, waking one reader), a
    send's completion as _py_on_send, a response as _py_on_response, a
    request as _py_on_request (_EpCore._on_request_rec)."""
    off = 0
    by_arg = _by_arg
    for _ in range(n):
        arg, length, imm, flags, kind = _rec_unpack(data, off)
        start = off + _REC_SIZE
        off = start + ((length + 7) & -8)
        if kind == _REC_REQ:  # imm | flags << 32: the request's address
            core = by_arg.get(arg)
            if core is None:  # cannot happen: closing drains it first
                continue
            try:
                core._on_request_rec(imm | flags << 32,
                                     data[start:start + length])
            except (KeyboardInterrupt, SystemExit) as exc:
                _late_exc.append(exc)
            except BaseException as exc:
                _report(exc, "exception in an rdmamsg callback")
            continue
        if kind:  # a completion: arg is the operation, flags its status
            status = flags - (1 << 32) if flags >> 31 else flags
            try:
                _finish(arg, status, data[start:start + length]
                        if kind == _REC_RESP and status == 0 else None)
            except (KeyboardInterrupt, SystemExit) as exc:
                _late_exc.append(exc)
            except BaseException as exc:
                _report(exc, "exception in an rdmamsg callback")
            continue
        core = by_arg.get(arg)
        if core is None:  # cannot happen: closing drains the batch first
            continue
        payload = data[start:start + length]
        try:
            rcv = core.receiver
            if rcv is not None:
                rcv(memoryview(payload), imm if flags & RECV_IMM else None)
                continue
            # a plain message is queued as its bytes, alone
            core.queue.append(payload if not flags
                              else (payload, imm, flags))
            waiters = core.recv_waiters
            while waiters:
                w = waiters.popleft()  # a _Waiter: set_result(None) inlined
                if not w._state:
                    w._state = 1
                    w._value = None
                    if w._cbs is not None:
                        w._run_cbs(True)
                    break
        except (KeyboardInterrupt, SystemExit) as exc:
            _late_exc.append(exc)
        except BaseException as exc:
            _report(exc, "exception in an rdmamsg callback")


#: KeyboardInterrupt or SystemExit of a callback that _deliver ran: raised
#: by the pump once the whole batch is delivered (nothing is lost)
_late_exc: list = []


@ffi.def_extern(onerror=_cb_error)
def _py_on_listener_closed(lst, arg):  # type: ignore
    ffi.from_handle(arg)._on_closed()


# The C wrappers of rdmamsg_build.py: each drains the receive batch first
# (see _deliver), so an endpoint's events reach Python in order.
_c_on_request = ffi.addressof(lib, "_rdmamsg_py_on_request")
_c_on_write_imm = ffi.addressof(lib, "_rdmamsg_py_on_write_imm")
_c_on_ep_closed = ffi.addressof(lib, "_rdmamsg_py_on_ep_closed")


def _make_cbs(tracked: bool, batched: bool) -> Any:
    cbs = ffi.new("struct rdmamsg_ep_cbs *")
    cbs.on_connect = lib._py_on_connect
    # batched: messages up to COPY_MAX bytes (all of them copied to bytes,
    # below keep_threshold) go into the pump's batch; else one by one
    cbs.on_recv = ffi.addressof(lib, "_rdmamsg_py_on_recv" if batched
                                else "_rdmamsg_py_on_recv1")
    if tracked:  # completions with op_ctx 0 (send_nowait) stay in C
        cbs.on_send = ffi.addressof(lib, "_rdmamsg_py_on_send")
    # track_sends=False: no on_send, so the library signals sends
    # selectively
    cbs.on_writable = lib._py_on_writable
    cbs.on_disconnect = ffi.addressof(lib, "_rdmamsg_py_on_disconnect")
    return cbs


#: The most bytes of a message that the pump's batch takes (smaller
#: keep_threshold: every message goes to Python one by one).
COPY_MAX: int = lib._RDMAMSG_PY_COPY_MAX
_REC_SIZE: int = lib._RDMAMSG_PY_REC_SIZE
_REC_RESP: int = lib._RDMAMSG_PY_RESP
_REC_REQ: int = lib._RDMAMSG_PY_REQ
_EP_CBS = {(t, b): _make_cbs(t, b) for t in (False, True)
           for b in (False, True)}


def _ep_cbs(tracked: bool, keep_threshold: int) -> Any:
    return _EP_CBS[(bool(tracked), keep_threshold > COPY_MAX)]


# ---------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------

class Context:
    """A device, its memory pool and the loop adapter, driven by one asyncio
    event loop (the running one unless ``loop`` is given; a closed loop
    raises ValueError, and nothing is made).

    ``fabric`` is ``"auto"`` (the default; the environment variable
    ``RDMAMSG_FABRIC`` applies), ``"verbs"`` or ``"soft"``; ``device`` a
    device name or a local IP address; ``pool_limit`` the most bytes the
    pool registers; ``listen_backlog`` the connection requests the fabric
    queues per listener before the loop takes them (1..65536, default
    1024); ``max_pending`` the unfinished handshakes of all the context's
    listeners at once, more being rejected with REJECT_RESOURCES
    (1..65536, default 1024).  ``busy_poll`` (seconds, default
    ``BUSY_POLL``: off) lets a pass that just handled traffic poll the
    library for up to that long before the loop blocks (see the
    ``busy_poll`` property).  Use ``async with Context() as ctx`` or
    ``await ctx.close()``: closing closes every endpoint and listener of
    the context and frees it once their close callbacks ran and no
    received buffer is referenced any more.
    """

    def __init__(self, *, fabric: str = "auto", device: Optional[str] = None,
                 pool_limit: Optional[int] = None, huge_pages: bool = False,
                 listen_backlog: Optional[int] = None,
                 max_pending: Optional[int] = None,
                 busy_poll: Optional[float] = None,
                 loop: Optional[asyncio.AbstractEventLoop] = None,
                 _default: bool = False) -> None:
        global _live_contexts
        self._ctx = None
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        # refused before the C context exists (add_reader() on a closed
        # loop would fail after it: a context nobody can close)
        if not isinstance(self._loop, asyncio.AbstractEventLoop):
            raise TypeError("loop must be an asyncio event loop")
        if self._loop.is_closed():
            raise ValueError("Context: the event loop is closed")
        if fabric not in _FABRICS:
            raise ValueError("fabric must be one of %s" % sorted(_FABRICS))
        spin_ns = _spin_ns(BUSY_POLL if busy_poll is None else busy_poll)
        attrp = ffi.new("struct rdmamsg_ctx_attr **")
        check(lib.rdmamsg_ctx_attr_new(attrp), "rdmamsg_ctx_attr_new")
        try:
            attr = attrp[0]
            check(lib.rdmamsg_ctx_attr_set_fabric(attr, _FABRICS[fabric]),
                  "fabric")
            if device is not None:
                check(lib.rdmamsg_ctx_attr_set_device(
                    attr, _cstr(device, "device")), "device")
            if pool_limit is not None:
                check(lib.rdmamsg_ctx_attr_set_pool_limit(attr, pool_limit),
                      "pool_limit")
            if huge_pages:
                check(lib.rdmamsg_ctx_attr_set_huge_pages(attr, 1),
                      "huge_pages")
            if listen_backlog is not None:
                check(lib.rdmamsg_ctx_attr_set_listen_backlog(
                    attr, _uint(listen_backlog, "listen_backlog")),
                    "listen_backlog")
            if max_pending is not None:
                check(lib.rdmamsg_ctx_attr_set_max_pending(
                    attr, _uint(max_pending, "max_pending")), "max_pending")
            ctxp = ffi.new("struct rdmamsg_ctx **")
            check(lib.rdmamsg_ctx_create(attr, ctxp), "rdmamsg_ctx_create")
        finally:
            lib.rdmamsg_ctx_attr_delete(attrp)
        self._ctx = ctxp[0]
        _live_contexts += 1
        fdp = ffi.new("int *")
        lib.rdmamsg_ctx_get_fd(self._ctx, fdp)
        self._fd = fdp[0]
        self._thread = threading.get_ident()
        self._default = _default
        self._in_pump = False
        self._stepping = False  # a task's step runs inside the pass
        # wake-ups of the pass's current progress call, run by _flush()
        # (the pump runs them after that call: the C pump returns 1 when
        # *_flagp is set)
        self._deferred: list = []
        # the pump's receive batch (rdmamsg_build.py), its bytes, and its
        # flag "a task was woken" that _Waiter sets
        self._batch = ffi.new("struct _rdmamsg_py_batch *")
        self._batch.spin_ns = spin_ns
        self._arena = ffi.buffer(self._batch.arena)
        # the loop's queue of ready callbacks (asyncio's own loops): a pass
        # spins (busy_poll) only while it is empty; () for other loops
        self._ready: Any = getattr(self._loop, "_ready", ())
        self._flagp = ffi.addressof(self._batch, "woke")
        self._raise_later: Optional[BaseException] = None
        self._pump_scheduled = False
        self._eps: Set[_EpCore] = set()
        self._listeners: Set[_ListenerCore] = set()
        self._srqs: Set[_SrqCore] = set()
        self._groups: Set[_GroupCore] = set()
        # groups with a publish waiting for room (-EAGAIN): retried after
        # every pass (the library has no "writable" callback for groups)
        self._group_waiting: Set[_GroupCore] = set()
        self._mrs: "weakref.WeakSet[MemoryRegion]" = weakref.WeakSet()
        self._bufs = 0  # pool buffers the Python side holds
        self._closing = False
        self._destroyed = self._loop.create_future()
        self._bufpp = ffi.new("struct rdmamsg_buf **")
        # The loop holds the context only weakly while it is open, so that
        # an unreferenced context is collected (and closed, with a warning).
        self._ref = weakref.ref(self)
        try:
            self._loop.add_reader(self._fd, _pump_weak, self._ref)
        except BaseException:  # a loop without add_reader(): nothing kept
            lib.rdmamsg_ctx_destroy(ffi.new("struct rdmamsg_ctx **",
                                            self._ctx))
            self._ctx = None
            _live_contexts -= 1
            raise

    # -- the arm/progress protocol -------------------------------------
    def _pump(self) -> None:
        """Do all ready work, then arm; -EBUSY: work came in, go again (the
        body is _pump_weak's, the loop's reader)."""
        _pump_weak(self._ref)

    def _pump_after(self, busy: int) -> None:
        """The rare ends of a pass (_pump_weak): tasks woken outside a
        progress call, groups waiting for room, a pass still due, a
        KeyboardInterrupt or SystemExit to raise."""
        if self._deferred:  # woken outside a progress call: the usual way
            self._flagp[0] = 0
            d = self._deferred
            self._deferred = []
            for w, cbs in d:
                for fn, context in ([cbs] if type(cbs) is tuple else cbs):
                    self._loop.call_soon(fn, w, context=context)
        if self._group_waiting:
            waiting = list(self._group_waiting)
            self._group_waiting.clear()
            for g in waiting:
                _wake_all(g.writers)
        if busy == _EBUSY:
            self._schedule()
        exc = self._raise_later
        if exc is not None:
            self._raise_later = None
            raise exc
        if _late_exc:
            raise _late_exc.pop()

    def _flush(self) -> None:
        """Run the steps of the tasks that the last progress call woke
        (inside the pass, before it arms)."""
        d = self._deferred
        self._deferred = []
        self._stepping = True
        try:
            for w, cbs in d:
                for fn, context in ([cbs] if type(cbs) is tuple else cbs):
                    try:
                        context.run(fn, w)
                    except (KeyboardInterrupt, SystemExit) as exc:
                        self._raise_later = exc  # out of the pass
                    except BaseException as exc:  # a task's wake-up: never
                        _report(exc, "exception waking an rdmamsg task")
        finally:
            self._stepping = False

    def _hold(self) -> None:
        """Closing: the loop keeps the context until it is destroyed."""
        try:
            self._loop.remove_reader(self._fd)
            self._loop.add_reader(self._fd, self._pump)
        except Exception:  # the loop is closed
            pass

    def _kick(self) -> None:
        """After a call from outside the pump (a send, a close ...): one
        pass of the pump right after the running task yields, for all the
        calls it made (a send's completion is often there by then), so the
        loop never blocks while the library has work pending."""
        if self._in_pump or self._pump_scheduled or self._ctx is None:
            return
        if not self._closing and _c_sent(self._ctx, self._batch) == 0:
            return  # nothing pending: the fd wakes the loop for what comes
        self._schedule()

    def _schedule(self) -> None:
        """A pass of the pump when the running task yields (arm() said work
        is pending that the fd will not announce)."""
        if self._pump_scheduled:
            return
        self._pump_scheduled = True
        if self._closing:
            self._loop.call_soon(self._pump)
        else:  # weakly, as the reader
            self._loop.call_soon(_pump_weak, self._ref)

    # -- properties ---------------------------------------------------------
    @property
    def busy_poll(self) -> float:
        """Busy polling, in seconds (0.0: off, the default).  When a pass
        of the loop adapter delivered work to Python (a message, a
        completion, a woken task) or a call from a task sent something, the
        pass polls the library for up to this long before it arms the fd
        and lets the loop block: an answer that comes meanwhile is handled
        without the loop's trip through epoll and without the peer waking
        this process.  A spin ends at the first work for Python; fruitless
        ones back off (after k in a row, the next 2**k - 1 chances are
        skipped, k <= 10), so a slow or silent peer costs little CPU.  A
        pass does not spin while the loop has other callbacks ready.
        Spinning costs CPU: worth it when the answer usually comes within
        the time and the peers have cores of their own."""
        return self._batch.spin_ns / 1e9

    @busy_poll.setter
    def busy_poll(self, seconds: float) -> None:
        self._batch.spin_ns = _spin_ns(seconds)

    def busy_poll_stats(self) -> "BusyPollStats":
        """The busy polling counters (see busy_poll)."""
        b = self._batch
        return BusyPollStats(int(b.spins), int(b.spin_hits),
                             int(b.spin_polls), int(b.spin_skips))

    def _c(self) -> Any:
        if self._ctx is None or self._closing:
            raise NotConnected(_errno.ENOTCONN, "the context is closed")
        _check_own(self)
        return self._ctx

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop driving this context."""
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closing

    @property
    def device_name(self) -> str:
        """The device's name ("softrdma0", "mlx5_0" ...)."""
        p = ffi.new("char **")
        check(lib.rdmamsg_ctx_get_device_name(self._c(), p))
        return ffi.string(p[0]).decode()

    @property
    def fabric(self) -> str:
        """"verbs" or "soft"."""
        p = ffi.new("enum rdmamsg_fabric *")
        check(lib.rdmamsg_ctx_get_fabric(self._c(), p))
        return {v: k for k, v in _FABRICS.items()}[p[0]]

    def query_cap(self, cap: str) -> Optional[int]:
        """A capability by name ("max_msg_size", "max_inline", "srq",
        "atomics", "multicast", "apm", "dc", "umr"): its value, or None when
        the device lacks it."""
        num = getattr(lib, "RDMAMSG_CAP_" + cap.upper(), None)
        if num is None:
            raise ValueError("unknown capability %r" % cap)
        v = ffi.new("uint64_t *")
        rc = lib.rdmamsg_ctx_query_caps(self._c(), num, v)
        if rc == -_errno.ENOTSUP:
            return None
        check(rc, "rdmamsg_ctx_query_caps")
        return int(v[0])

    def dc_stats(self) -> DcStats:
        """The context's DC counters (rdmamsg_ctx_dc_stats); raises
        NotSupported where the context has no DC."""
        st = ffi.new("struct rdmamsg_dc_stats *")
        check(lib.rdmamsg_ctx_dc_stats(self._c(), st), "dc_stats")
        return DcStats(int(st.dcis), int(st.dcts), int(st.endpoints),
                       int(st.qps), int(st.tag_drops), int(st.dci_waits),
                       int(st.dci_resets), int(st.key_violations))

    def query_pool(self) -> Tuple[int, int]:
        """(bytes registered, bytes in use) of the context's pool."""
        r = ffi.new("size_t *")
        u = ffi.new("size_t *")
        check(lib.rdmamsg_ctx_query_pool(self._c(), r, u))
        return int(r[0]), int(u[0])

    # -- memory ---------------------------------------------------------
    def alloc(self, size: int) -> "PoolBuffer":
        """A registered pool buffer of at least ``size`` bytes, for
        zero-copy sends (``Endpoint.send(buf, nbytes)``)."""
        p = ffi.new("struct rdmamsg_buf **")
        check(lib.rdmamsg_buf_alloc(self._c(), size, p), "rdmamsg_buf_alloc")
        return PoolBuffer(self, p[0])

    def create_srq(self, max_bufs: int,
                   buf_size: int = 8192) -> "SharedReceiveQueue":
        """A shared receive queue: endpoints made with ``srq=`` (connect,
        listen, start_server) receive through it, its memory at most
        ``max_bufs`` buffers (8..1048576) of ``buf_size`` bytes (64..1 MiB,
        at least each endpoint's eager size) whatever the number of
        endpoints.  Raises OSError (ENOTSUP) on a device without SRQs."""
        return SharedReceiveQueue(self, max_bufs, buf_size)

    def register(self, buffer: BufferLike,
                 access: int = 0) -> "MemoryRegion":
        """Register ``buffer`` (any writable or read-only bytes-like object)
        for one-sided operations; ``access`` ORs ACCESS_REMOTE_*.  Read-only
        memory (``bytes``, a read-only view) takes ACCESS_REMOTE_READ only:
        TypeError with ACCESS_REMOTE_WRITE or ACCESS_REMOTE_ATOMIC, which
        would let a peer change an immutable object."""
        return MemoryRegion(self, buffer, access)

    def alloc_region(self, size: int, access: int = 0) -> "MemoryRegion":
        """``size`` bytes of new zeroed memory, registered for one-sided
        operations and send_nocopy() (``access`` ORs ACCESS_REMOTE_*);
        ``mr.view`` is a memoryview of it.  Made as rdmamsg_mr_alloc(3)
        makes it, shared memory a peer on the same host may map (on
        softrdma the cheapest to read in place), here as a Python mmap:
        the memory lives while Python references it, after close() too.
        Raises InvalidArgument for a size below 1."""
        if size < 1:
            raise make_error(-_errno.EINVAL, "alloc_region")
        try:
            fd = os.memfd_create("rdmamsg-mr", os.MFD_CLOEXEC |
                                 os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError):
            mr = MemoryRegion(self, mmap.mmap(-1, size), access)
            mr._own = True
            return mr
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK |
                        fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            # registered while the fd is open: a provider that shares
            # registrations (softrdma) finds the file then
            mr = MemoryRegion(self, mmap.mmap(fd, size), access)
            mr._own = True  # its view outlives close()
            return mr
        finally:
            os.close(fd)

    def register_iov(self, buffers: Any, access: int = 0) -> "MemoryRegion":
        """Register ``buffers`` (a list or tuple of 1 to 1024 non-empty
        bytes-like objects) as one region whose offsets run through them
        in order (rdmamsg_mr_reg_iov).  With UMR (``query_cap("umr")``)
        it has one key and its export addresses all of it: a peer writes
        or reads the pieces in one operation.  Without UMR it is an SGE
        list: the local region of write()/read() of ranges of at most 2
        pieces (OSError ENOTSUP beyond), and export() raises ENOTSUP.
        ``mr.layout`` says which; ``mr.view`` is None.  Raises
        InvalidArgument for no, too many or empty pieces; TypeError for a
        read-only piece with remote write or atomic access (register())."""
        return MemoryRegion._pieces(self, buffers, access)

    def register_strided(self, buffer: BufferLike, block: int, stride: int,
                         count: int, access: int = 0) -> "MemoryRegion":
        """Register ``count`` (1 to 65536) blocks of ``block`` bytes,
        ``stride`` bytes apart from the start of ``buffer``, as one region
        whose offsets run through the blocks only (rdmamsg_mr_reg_strided;
        UMR or not as register_iov()).  ValueError when the blocks reach
        past the buffer; InvalidArgument for zero sizes or stride <
        block; TypeError for read-only memory with remote write or atomic
        access (register())."""
        return MemoryRegion._strided(self, buffer, block, stride, count,
                                     access)

    async def join(self, addr: str, **options: Any) -> "Group":
        """Join the multicast group at ``addr`` through this context: see
        ``rdmamsg.join()``."""
        return await join(addr, ctx=self, **options)

    def _region_of(self, p: Any, n: int) -> Optional["MemoryRegion"]:
        """The open region registered with ACCESS_REMOTE_READ that holds
        the n bytes at p (where rdmamsg_send_nocopy reads them in place),
        or None."""
        a = int(ffi.cast("uintptr_t", p))
        for mr in self._mrs:
            if mr._closing or mr.view is None or \
                    not mr.access & ACCESS_REMOTE_READ:
                continue
            lo = int(ffi.cast("uintptr_t", mr._p))
            if lo <= a and a - lo + n <= mr.size:
                return mr
        return None

    def _buf_gone(self) -> None:
        self._bufs -= 1
        if self._closing and self._bufs == 0:
            self._loop.call_soon(self._try_destroy)

    def _keep_view(self, buf: Any, data: Any, length: int) -> memoryview:
        """A memoryview over a kept receive buffer; freeing the last
        reference to it (or memoryview.release()) frees the buffer."""
        self._bufs += 1
        p = ffi.gc(ffi.cast("char *", data), _BufRelease(self, buf), length)
        return memoryview(ffi.buffer(p, length))

    # -- closing ----------------------------------------------------------
    def close_nowait(self) -> None:
        """Start closing (see close())."""
        if self._closing:
            return
        _check_own(self)
        self._closing = True
        self._hold()
        for core in list(self._listeners):
            core.close_nowait()
        for g in list(self._groups):
            g.close_nowait(user=True)
        for ep in list(self._eps):
            ep.close_nowait(user=True)
        for srq in list(self._srqs):  # freed once its endpoints are
            srq.close_nowait()
        for mr in list(self._mrs):
            mr.close()
        self._try_destroy()

    async def close(self) -> None:
        """Close every endpoint and listener, wait for them, free the
        context."""
        self.close_nowait()
        await asyncio.shield(self._destroyed)

    def _holds(self) -> bool:
        """Something of this context is still open."""
        return bool(self._eps or self._listeners or self._srqs or
                    self._groups or self._bufs or len(self._mrs))

    def _free(self) -> int:
        """rdmamsg_ctx_destroy(): its result; the context is gone but
        for -EBUSY (called from inside a callback)."""
        global _live_contexts
        p = ffi.new("struct rdmamsg_ctx **", self._ctx)
        rc = lib.rdmamsg_ctx_destroy(p)
        if rc != _EBUSY:
            self._ctx = None
            _live_contexts -= 1
        return rc

    def _try_destroy(self) -> None:
        if self._ctx is None or not self._closing:
            return
        if self._holds():
            self._kick()
            return
        try:
            self._loop.remove_reader(self._fd)
        except Exception:  # the loop is closed: nothing to remove
            pass
        rc = self._free()
        if rc == _EBUSY:  # from inside a callback: once more, later
            self._loop.call_soon(self._try_destroy)
            return
        if not self._destroyed.done():
            if rc < 0:
                self._destroyed.set_exception(make_error(rc))
            else:
                self._destroyed.set_result(None)

    async def __aenter__(self) -> "Context":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        if getattr(self, "_ctx", None) is None or self._closing:
            return
        if not self._default:
            warnings.warn("unclosed rdmamsg context %r" % self,
                          ResourceWarning, source=self)
        if not self._loop.is_closed():
            _close_later(self, self.close_nowait)
        elif not self._holds():
            # its loop is closed (asyncio.run() ended: the default
            # context's usual end), so nothing will close it, and nothing
            # of it is open: freed now, not left for the process's life
            self._closing = True
            self._free()

    def __repr__(self) -> str:
        return "<rdmamsg.Context fd=%d%s>" % (
            self._fd, " closed" if self._closing else "")


def _pump_weak(ref: "weakref.ref[Context]") -> None:
    """One pass of the pump of the context ref: all ready work, then arm
    (the loop's reader; Context._pump)."""
    self = ref()
    if self is None:
        return  # collected: its __del__ closed it and holds it strongly since
    self._pump_scheduled = False
    ctx = self._ctx
    if ctx is None:
        return
    self._in_pump = True
    b = self._batch
    try:
        # progress; arm until it says 0 (C), or PUMP_ROUNDS progress calls
        # (then the rest in a later pass, after the loop's other callbacks:
        # a peer that keeps answering at once cannot starve them).  > 0: a
        # progress call batched busy - 1 records or woke tasks: deliver
        # them, run the steps, go on with arm.  The C pump busy-polls
        # (busy_poll) only while the loop has nothing else ready.
        ready = self._ready
        busy = _c_pump(ctx, PUMP_ROUNDS, b, not ready)
        while busy > 0:
            if busy > 1:
                _deliver(self._arena, busy - 1)
            if self._deferred:
                self._flush()
            busy = _c_pump(ctx, 0, b, not ready)
    finally:
        self._in_pump = False
    if busy or self._deferred or self._group_waiting or \
            self._raise_later is not None or _late_exc:
        self._pump_after(busy)


class _BufRelease:
    """ffi.gc destructor of a kept receive buffer, or of the memory of a
    PoolBuffer (buf None once sent: the library frees it)."""
    __slots__ = ("ctx", "buf")

    def __init__(self, ctx: Context, buf: Any) -> None:
        self.ctx = ctx
        self.buf = buf

    def __call__(self, _p: Any) -> None:
        ctx = self.ctx
        if threading.get_ident() != ctx._thread:
            if not ctx._loop.is_closed():
                ctx._loop.call_soon_threadsafe(self._free)
            return
        self._free()

    def _free(self) -> None:
        if self.buf is not None:  # None: a PoolBuffer sent meanwhile
            lib.rdmamsg_buf_free(self.buf)
        self.ctx._buf_gone()


_default_contexts: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Context]" = \
    weakref.WeakKeyDictionary()


_DEFAULT_ATTR = "_rdmamsg_default_context"


def get_context() -> Context:
    """The running loop's default context (made on first use).  The loop
    holds it: once the loop is closed and gone (asyncio.run() ended) the
    context is freed with it, provided nothing of it is left open."""
    loop = asyncio.get_running_loop()
    d = getattr(loop, "__dict__", None)
    ctx = d.get(_DEFAULT_ATTR) if d is not None else \
        _default_contexts.get(loop)
    if ctx is None or ctx.closed:
        ctx = Context(loop=loop, _default=True)
        if d is not None:
            # a loop and its context make one cycle, which the collector
            # frees (Context.__del__ frees the C context then); a weak
            # key whose value holds the key would keep both for ever
            d[_DEFAULT_ATTR] = ctx
        else:  # a loop without a __dict__
            _default_contexts[loop] = ctx
    return ctx


def _make_ep_attr(opts: Dict[str, Any],
                  private_data: Optional[BufferLike]) -> Any:
    attrp = ffi.new("struct rdmamsg_ep_attr **")
    check(lib.rdmamsg_ep_attr_new(attrp), "rdmamsg_ep_attr_new")
    try:
        attr = attrp[0]
        for key, value in opts.items():
            if key in _EP_OBJS:
                if value is None:
                    continue
                if key == "srq":
                    if not isinstance(value, SharedReceiveQueue):
                        raise TypeError("srq must be a SharedReceiveQueue")
                    check(lib.rdmamsg_ep_attr_set_srq(attr, value._c()),
                          "srq")
                elif key in ("reconnect_timeout", "reconnect_tries"):
                    pass  # the pair, below
                elif key == "failover":
                    check(lib.rdmamsg_ep_attr_set_failover(
                        attr, _failover(value)), "failover")
                    # the events are recorded (path_events) even without
                    # on_path
                    check(lib.rdmamsg_ep_attr_set_path_cb(
                        attr, lib._py_on_path), "on_path")
                elif key == "on_path":
                    if not callable(value):
                        raise TypeError("on_path must be callable")
                    check(lib.rdmamsg_ep_attr_set_path_cb(
                        attr, lib._py_on_path), "on_path")
                else:
                    if not callable(value):
                        raise TypeError("recv_alloc must be callable")
                    check(lib.rdmamsg_ep_attr_set_recv_alloc(
                        attr, lib._py_recv_alloc), "recv_alloc")
                continue
            if key not in _EP_ATTRS:
                raise TypeError("unknown endpoint option %r" % key)
            if value is None:
                continue
            setter, conv = _EP_ATTRS[key]
            try:
                v = conv(value)
                if v < 0:
                    raise ValueError("%s cannot be negative" % key)
                rc = getattr(lib, setter)(attr, v)
            except OverflowError:  # past the C type: out of range too
                rc = -_errno.EINVAL
            check(rc, key)
        rec = _reconnect(opts)
        if rec is not None:
            check(lib.rdmamsg_ep_attr_set_reconnect(attr, rec[0], rec[1]),
                  "reconnect_timeout/tries")
        if private_data is not None:
            p, n = _buf_ptr(private_data)
            check(lib.rdmamsg_ep_attr_set_private_data(attr, p, n),
                  "private_data")
        lib.rdmamsg_ep_attr_set_on_request(attr, _c_on_request)
        lib.rdmamsg_ep_attr_set_on_write_imm(attr, _c_on_write_imm)
    except BaseException:
        lib.rdmamsg_ep_attr_delete(attrp)
        raise
    return attrp


# ---------------------------------------------------------------------------
# Endpoints
# ---------------------------------------------------------------------------

class Message:
    """A received message: ``data`` (a memoryview), ``imm`` (the sender's
    immediate value or None) and ``large`` (it came by rendezvous)."""
    __slots__ = ("data", "imm", "large")

    def __init__(self, data: memoryview, imm: Optional[int],
                 large: bool) -> None:
        self.data = data
        self.imm = imm
        self.large = large

    def tobytes(self) -> bytes:
        return self.data.tobytes()

    def release(self) -> None:
        """Give a kept pool buffer back now (the view becomes unusable)."""
        self.data.release()

    def __len__(self) -> int:
        return self.data.nbytes

    def __repr__(self) -> str:
        return "<rdmamsg.Message %d bytes imm=%r>" % (self.data.nbytes,
                                                      self.imm)


class Request:
    """A request of the peer: ``data`` (bytes); answer with ``respond()`` or
    ``drop()``.  Invalid once the endpoint has closed."""
    __slots__ = ("data", "_req", "_core")

    def __init__(self, core: "_EpCore", req: Any, data: bytes) -> None:
        self.data = data
        self._req = req
        self._core = core

    def respond(self, data: BufferLike) -> None:
        """Answer with ``data`` (copied).  ``rdmamsg.WouldBlock`` (a
        BlockingIOError) when the pool is short: the request stays valid,
        respond again after ``await ep.wait_writable()`` (or drop it)."""
        if self._req is None:
            raise NotConnected(_errno.ENOTCONN, "request already answered "
                               "or its endpoint closed")
        _check_own(self._core.ctx)
        p, n = _buf_ptr(data)
        rc = lib.rdmamsg_respond(self._req, p, n)
        if rc == -_errno.ENOTCONN:
            self.drop()
        check(rc, "rdmamsg_respond")
        self._forget()

    def drop(self) -> None:
        """Free the request without answering (the peer times out)."""
        if self._req is not None:
            _check_own(self._core.ctx)
            lib.rdmamsg_req_drop(self._req)
            self._forget()

    def _forget(self) -> None:
        self._req = None
        self._core._requests.discard(self)
        self._core.ctx._kick()


_END_PEER = 0  # peer closed cleanly


class _EpCore:
    """The endpoint's state, kept by its context until close_cb ran (the
    user's Endpoint wrapper may be garbage-collected before)."""

    def __init__(self, ctx: Context, keep_threshold: int,
                 request_handler: Optional[Callable[..., Any]],
                 track_sends: bool = True) -> None:
        self.ctx = ctx
        self.tracked = track_sends
        self.loop = ctx._loop
        self.ep: Any = None
        self.handle = ffi.new_handle(self)
        self.arg = int(ffi.cast("uintptr_t", self.handle))
        self.keep_threshold = keep_threshold
        self.max_msg = 0
        self.connect_fut: Optional[asyncio.Future] = self.loop.create_future()
        self.connect_info: Tuple[int, bytes] = (0, b"")
        self.closed_fut: asyncio.Future = self.loop.create_future()
        self.closing = False
        self.user_closed = False
        self.end: Optional[int] = None  # None while messages may still come
        # received messages: bytes (a copy) or memoryview (a kept buffer)
        # when without flags, else (payload, imm, flags); see _item()
        self.queue: Deque[Any] = deque()
        # set_receiver(): messages go to this callback, not to the queue
        self.receiver: Optional[Callable[[memoryview, Optional[int]],
                                         Any]] = None
        self.recv_waiters: Deque[asyncio.Future] = deque()
        # recv_request(): apart, so that a message never wakes it in the
        # place of a recv() (nor a request a recv())
        self.request_waiters: Deque[asyncio.Future] = deque()
        self.writers: Deque[asyncio.Future] = deque()
        # the sending awaits waiting for room, in the order they started
        # (post_in_turn): the head retries, the others wait their turn
        self.sendq: Deque[_Waiter] = deque()
        self.write_imms: Deque[Tuple[int, int]] = deque()
        self.write_imm_waiters: Deque[asyncio.Future] = deque()
        self._requests: Set[Request] = set()
        self.pending_requests: Deque[Request] = deque()
        # answers of request handlers that rdmamsg_respond() refused with
        # -EAGAIN (the pool is short; the request stays valid): answered
        # again at on_writable, which follows
        self.responses: Deque[Tuple[Request, Any]] = deque()
        self.request_handler = request_handler
        self.on_connected: Optional[Callable[["_EpCore"], None]] = None
        self.idp = ffi.new("uint64_t *")
        self.srq: Optional[SharedReceiveQueue] = None  # kept while in use
        self.recv_alloc: Optional[Callable[[int], Any]] = None
        # large messages landing in the caller's regions (recv_alloc):
        # address -> [(MemoryRegion, offset), ...]
        self.landing: Dict[int, list] = {}
        # path events of a connect with a failover policy (the latest 64)
        self.on_path: Optional[Callable[[PathEvent], Any]] = None
        self.path_events: Deque[PathEvent] = deque(maxlen=64)

    def add_to_ctx(self) -> None:
        """The endpoint exists: its context keeps it until close_cb ran,
        and the pump's batch finds it by its arg (see _deliver)."""
        self.ctx._eps.add(self)
        _by_arg[self.arg] = self

    def set_objs(self, options: Dict[str, Any]) -> None:
        self.srq = options.get("srq")
        self.recv_alloc = options.get("recv_alloc")
        self.on_path = options.get("on_path")

    def _alloc(self, length: int, datap: Any, mrp: Any) -> int:
        """recv_alloc: where the large message of length bytes lands."""
        try:
            r = self.recv_alloc(length)  # type: ignore[misc]
        except OSError as exc:  # refused: the sender gets this errno
            return -(exc.errno or _errno.EIO)
        except Exception as exc:
            _report(exc, "exception in an rdmamsg recv_alloc callback")
            return -_errno.ENOBUFS
        if r is None:
            return 0  # the library's memory (copied to bytes as usual)
        mr, off = r if isinstance(r, tuple) else (r, 0)
        try:
            if not isinstance(mr, MemoryRegion) or \
                    isinstance(off, bool) or not isinstance(off, int):
                raise TypeError("recv_alloc must return None, a "
                                "MemoryRegion or (MemoryRegion, offset)")
            if mr.readonly:
                raise TypeError("recv_alloc: the region is read-only")
            if mr.view is None:
                raise TypeError("recv_alloc: the region is not contiguous")
            if mr._ctx is not self.ctx:
                raise ValueError("recv_alloc: the region belongs to "
                                 "another context")
            if off < 0 or off > mr.size or length > mr.size - off:
                raise ValueError("recv_alloc: %d bytes do not fit at "
                                 "offset %d of a %d-byte region"
                                 % (length, off, mr.size))
            c = mr._c()
        except (TypeError, ValueError) as exc:
            _report(exc, "bad result of an rdmamsg recv_alloc callback")
            return -_errno.EINVAL
        addr = ffi.cast("char *", mr._p) + off
        datap[0] = addr
        mrp[0] = c
        mr._op_start()  # registered until the message is in
        self.landing.setdefault(int(ffi.cast("uintptr_t", addr)),
                                []).append((mr, off))
        return 0

    def _landed(self, data: Any, length: int) -> Optional[memoryview]:
        """The caller's region a large message landed in, as a view."""
        key = int(ffi.cast("uintptr_t", data))
        spots = self.landing.get(key)
        if not spots:
            return None
        mr, off = spots.pop(0)
        if not spots:
            del self.landing[key]
        view = mr.view
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        view = view[off:off + length]  # before a close lets mr.view go
        mr._op_done()
        return view

    # -- callbacks ----------------------------------------------------------
    def _on_connect(self, status: int, reason: int, pdata: bytes) -> None:
        self.connect_info = (reason, pdata)
        if status == 0:
            sz = ffi.new("size_t *")
            if lib.rdmamsg_ep_get_max_msg_size(self.ep, sz) == 0:
                self.max_msg = int(sz[0])
        fut = self.connect_fut
        if self.on_connected is not None:  # accepted by a listener
            self.on_connected(self, status)
        if fut is not None and not fut.done():
            if status == 0:
                fut.set_result(None)
            else:
                exc = make_error(status)
                exc.reason = reason  # type: ignore[attr-defined]
                exc.private_data = pdata  # type: ignore[attr-defined]
                exc.path_events = tuple(  # type: ignore[attr-defined]
                    self.path_events)
                fut.set_exception(exc)
        self.connect_fut = None

    def _on_path(self, event: int, path: int, status: int) -> None:
        try:
            kind: Any = PathEventType(event)
        except ValueError:  # an event newer than this binding
            kind = int(event)
        ev = PathEvent(kind, int(path), int(status))
        self.path_events.append(ev)
        cb = self.on_path
        if cb is None:
            return
        try:
            res = cb(ev)
        except Exception as exc:
            _report(exc, "exception in an rdmamsg path callback")
            return
        if inspect.isawaitable(res):
            task = asyncio.ensure_future(res, loop=self.loop)
            _path_tasks.add(task)
            task.add_done_callback(_path_tasks.discard)
            task.add_done_callback(_done_task)

    def _on_recv(self, data: Any, length: int, imm: int, flags: int) -> None:
        landed = None
        if flags & RECV_LARGE and self.landing:
            landed = self._landed(data, length)
        if landed is not None:
            payload: Any = landed
        elif length >= self.keep_threshold and not (flags & RECV_LARGE):
            bufpp = self.ctx._bufpp
            if lib.rdmamsg_recv_keep(self.ep, bufpp) == 0:
                payload = self.ctx._keep_view(bufpp[0], data, length)
            else:
                payload = ffi.buffer(data, length)[:]
        else:
            payload = ffi.buffer(data, length)[:]
        if self.receiver is not None:
            self.receiver(memoryview(payload) if type(payload) is bytes
                          else payload, imm if flags & RECV_IMM else None)
            return
        self.queue.append(payload if not flags else (payload, imm, flags))
        _wake_one(self.recv_waiters)

    def _on_writable(self) -> None:
        """on_writable: responses that found no room go first, then the
        oldest waiting send retries (the others follow it in turn);
        wait_writable() returns once none waits."""
        if self.responses:
            self._respond_again()
        q = self.sendq
        if q:
            if not q[0].done():
                q[0].set_result(None)
        else:
            _wake_all(self.writers)

    def _respond_again(self) -> None:
        """Answer the requests whose responses found no room (see
        _answer), in order, until one finds none again (the next
        on_writable goes on)."""
        rs = self.responses
        while rs:
            r, res = rs[0]
            if r._req is not None:
                try:
                    r.respond(res)
                except BlockingIOError:
                    return
                except Exception as exc:
                    rs.popleft()
                    _answer_failed(r, exc)
                    continue
            rs.popleft()

    def _wake_writers(self) -> None:
        """Wake every waiting send (the endpoint ends: each raises and
        leaves self.sendq)."""
        for w in self.sendq:
            if not w.done():
                w.set_result(None)
        _wake_all(self.writers)

    def _on_disconnect(self, status: int) -> None:
        self.end = status
        _wake_all(self.recv_waiters)
        _wake_all(self.request_waiters)
        _wake_all(self.write_imm_waiters)
        self._wake_writers()
        self.close_nowait(user=False)

    def _on_closed(self) -> None:
        self.ep = None
        for spots in self.landing.values():  # never landed: let go
            for mr, _off in spots:
                mr._op_done()
        self.landing.clear()
        for r in list(self._requests):
            r._req = None
        self._requests.clear()
        self.pending_requests.clear()
        self.responses.clear()
        if self.end is None:
            self.end = -_errno.ECANCELED
        _wake_all(self.recv_waiters)
        _wake_all(self.request_waiters)
        _wake_all(self.write_imm_waiters)
        self._wake_writers()
        fut = self.connect_fut
        if fut is not None and not fut.done():
            fut.set_exception(OperationCanceled(_errno.ECANCELED,
                                                "closed while connecting"))
        self.connect_fut = None
        if not self.closed_fut.done():
            self.closed_fut.set_result(None)
        ctx = self.ctx
        ctx._eps.discard(self)
        _by_arg.pop(self.arg, None)
        if ctx._closing:
            self.loop.call_soon(ctx._try_destroy)

    def _on_request_rec(self, reqp: int, data: bytes) -> None:
        """A request from the pump's batch (reqp: the struct rdmamsg_req's
        address): a handler that returns bytes at once is answered right
        here, without a Request object; anything else as _on_request."""
        h = self.request_handler
        if h is None:
            self._on_request(ffi.cast("struct rdmamsg_req *", reqp), data)
            return
        try:
            res = h(data)
        except Exception as exc:
            lib.rdmamsg_req_drop(ffi.cast("struct rdmamsg_req *", reqp))
            _report(exc, "exception in an rdmamsg request handler")
            return
        if type(res) is bytes and _c_respond(reqp, res, len(res)) == 0:
            return
        r = Request(self, ffi.cast("struct rdmamsg_req *", reqp), data)
        self._requests.add(r)
        if inspect.isawaitable(res):
            task = self.loop.create_task(_respond_later(r, res))
            task.add_done_callback(_done_task)
        else:  # None drops it; an error of respond() is reported there
            _answer(r, res)

    def _on_request(self, req: Any, data: bytes) -> None:
        r = Request(self, req, data)
        self._requests.add(r)
        if self.request_handler is not None:
            self._dispatch_request(r)
        else:
            self.pending_requests.append(r)
            _wake_one(self.request_waiters)

    def _dispatch_request(self, r: Request) -> None:
        try:
            res = self.request_handler(r.data)  # type: ignore[misc]
        except Exception as exc:
            r.drop()
            _report(exc, "exception in an rdmamsg request handler")
            return
        if inspect.isawaitable(res):
            task = self.loop.create_task(_respond_later(r, res))
            task.add_done_callback(_done_task)
        else:
            _answer(r, res)

    def _on_write_imm(self, imm: int, length: int) -> None:
        self.write_imms.append((imm, length))
        _wake_one(self.write_imm_waiters)

    # -- calls ------------------------------------------------------------
    def c(self) -> Any:
        if self.ep is None or self.closing:
            raise NotConnected(_errno.ENOTCONN, "the endpoint is closed")
        return self.ep

    def close_nowait(self, user: bool) -> None:
        if user:
            self.user_closed = True
            if self.end is None or self.end == _END_PEER:
                self.end = -_errno.ECANCELED
            # Unread messages of a closed endpoint: drop our references
            # (kept buffers go back to the pool unless the user holds them).
            self.queue.clear()
        if self.closing or self.ep is None:
            return
        self.closing = True
        rc = lib.rdmamsg_ep_close(self.ep, _c_on_ep_closed)
        if rc < 0 and rc != -_errno.EALREADY:
            _report(make_error(rc), "rdmamsg_ep_close")
        _wake_all(self.recv_waiters)
        _wake_all(self.request_waiters)
        self._wake_writers()
        self.ctx._kick()

    def end_error(self) -> BaseException:
        if self.end == _END_PEER:
            return EndOfStream("the peer closed the connection")
        if self.end == -_errno.ECANCELED:
            return OperationCanceled(_errno.ECANCELED, "the endpoint is closed")
        return make_error(self.end if self.end is not None
                          else -_errno.ENOTCONN)

    async def wait_writable(self) -> None:
        fut = _Waiter(self.ctx)
        self.writers.append(fut)
        await fut

    async def post_in_turn(self, post: Callable[[], Tuple[int, Any]]
                           ) -> Tuple[int, Any]:
        """post() -- one sending call, returning (status, what to keep) --
        for a sending await that may not post now: post() was refused
        (-EAGAIN: credits and backlog, pool or copies ahead used up) or
        others wait already.  It waits at the tail of self.sendq, so the
        awaits post in the order they started (an RC stream's order); the
        head retries at on_writable, and when it leaves (posted, failed or
        cancelled) the next one tries at once.  A cancelled one leaves
        without posting."""
        q = self.sendq
        w = _Waiter(self.ctx)
        q.append(w)
        try:
            while True:
                await w
                r = post()
                if r[0] != _EAGAIN:
                    return r
                nw = _Waiter(self.ctx)  # refused again: keep the place
                q[q.index(w)] = nw
                w = nw
        finally:
            head = q[0] is w
            q.remove(w)
            if head:
                if q:
                    if not q[0].done():
                        q[0].set_result(None)
                else:  # none waits: what send_nowait() refused may go
                    _wake_all(self.writers)


def _item(entry: Any) -> Tuple[Any, int, int]:
    """(payload, imm, flags) of an entry of _EpCore.queue."""
    if type(entry) is tuple:
        return entry
    return entry, 0, 0


def _wake_one(waiters: Deque[asyncio.Future]) -> None:
    while waiters:
        w = waiters.popleft()
        if not w.done():
            w.set_result(None)
            return


def _wake_all(waiters: Deque[asyncio.Future]) -> None:
    """Wake the waiters there are now: a task woken in place that waits
    again (a send that finds no room yet) waits for the next wake-up."""
    if not waiters:
        return
    now = list(waiters)
    waiters.clear()
    for w in now:
        if not w.done():
            w.set_result(None)


def _answer(r: Request, res: Any) -> None:
    if r._req is None:
        return
    if res is None:
        r.drop()
        return
    try:
        r.respond(res)
    except BlockingIOError:
        # -EAGAIN: the pool is short while others of the endpoint's sends
        # are in flight; the request stays valid and on_writable follows,
        # which answers it (_EpCore._respond_again)
        r._core.responses.append((r, res))
    except Exception as exc:
        _answer_failed(r, exc)


def _answer_failed(r: Request, exc: Exception) -> None:
    if isinstance(exc, NotConnected):  # the connection went down
        return
    # a result that is not bytes-like, too large, no pool memory at all:
    # the request is dropped (the requester times out), not left pending
    r.drop()
    _report(exc, "rdmamsg_respond")


async def _respond_later(r: Request, aw: Awaitable[Any]) -> None:
    try:
        res = await aw
    except BaseException:
        r.drop()
        raise
    _answer(r, res)


def _done_task(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        _report(task.exception(), "exception in an rdmamsg handler")


async def _wait_item(core: _EpCore, waiters: Deque[asyncio.Future],
                     ready: Callable[[], bool]) -> None:
    """Wait until ready() or the endpoint's end (as asyncio.Queue.get: a
    waiter only wakes, the item stays queued, so cancellation loses none)."""
    while not ready():
        if core.end is not None or core.closing:
            raise core.end_error()
        if core.receiver is not None and waiters is core.recv_waiters:
            raise RuntimeError("messages go to the receiver callback "
                               "(set_receiver)")
        fut = _Waiter(core.ctx)
        waiters.append(fut)
        try:
            await fut
        except BaseException:
            fut.cancel()
            try:
                waiters.remove(fut)
            except ValueError:
                pass
            if ready():
                _wake_one(waiters)
            raise


def _recv_waiter(core: _EpCore) -> asyncio.Future:
    """_wait_item's step for recv() and async for, as a plain function (one
    coroutine frame less per message that waits): a future to await, or
    the endpoint's end raised."""
    if core.end is not None or core.closing:
        raise core.end_error()
    if core.receiver is not None:
        raise RuntimeError("messages go to the receiver callback "
                           "(set_receiver)")
    fut = _Waiter(core.ctx)
    core.recv_waiters.append(fut)
    return fut


def _recv_unwait(core: _EpCore, fut: asyncio.Future) -> None:
    """The await of a _recv_waiter future failed (cancelled): forget it and
    pass a wake-up it took on to the next waiter."""
    fut.cancel()
    try:
        core.recv_waiters.remove(fut)
    except ValueError:
        pass
    if core.queue:
        _wake_one(core.recv_waiters)


class Endpoint:
    """One reliable connection (from ``connect()`` or a listener).

    Messages arrive whole and in order: ``await ep.recv()`` (a memoryview),
    ``recv_bytes()``, ``recv_msg()`` or ``async for msg in ep``.  ``await
    ep.send(data)`` returns when the peer has the message.  Close with
    ``await ep.close()`` or ``async with``; an endpoint garbage-collected
    open is closed with a ResourceWarning.
    """

    def __init__(self, core: _EpCore) -> None:
        self._core = core

    # -- state ----------------------------------------------------------
    @property
    def context(self) -> Context:
        return self._core.ctx

    @property
    def connected(self) -> bool:
        c = self._core
        return c.ep is not None and not c.closing and c.end is None

    @property
    def max_msg_size(self) -> int:
        """Largest message ``send()`` carries eagerly (larger ones go by
        rendezvous)."""
        return self._core.max_msg

    @property
    def peer_private_data(self) -> bytes:
        """The private data of the peer's accept (client side)."""
        return self._core.connect_info[1]

    @property
    def path_events(self) -> Tuple[PathEvent, ...]:
        """The path events of the connect (``failover="reconnect"``), in
        order: what ``on_path`` was given."""
        return tuple(self._core.path_events)

    def _test_break(self) -> None:
        """For tests (rdmamsg_ep_test_break): the connection fails as after
        a transport retry exhaustion.  NotConnected unless connected."""
        check(lib.rdmamsg_ep_test_break(self._core.c()), "test_break")

    def path_stats(self) -> PathStats:
        """The path counters (rdmamsg_ep_get_path_stats): the addresses
        given, the one in use, path downs, failovers, the time the last
        failover took, path migrations (apm=True), whether an alternate
        path is loaded, and the connect attempts after failures."""
        st = ffi.new("struct rdmamsg_path_stats *")
        check(lib.rdmamsg_ep_get_path_stats(self._core.c(), st),
              "path_stats")
        return PathStats(int(st.npaths), int(st.path), int(st.path_downs),
                         int(st.failovers), int(st.failover_fails),
                         int(st.last_failover_ns), int(st.migrations),
                         int(st.mig_fails), bool(st.apm), int(st.attempts))

    @property
    def protocols(self) -> Protocols:
        """The connection's protocol thresholds (rdmamsg_ep_get_protocols):
        inline, eager, fragments up to rndv_threshold, rendezvous above."""
        pr = ffi.new("struct rdmamsg_protocols *")
        check(lib.rdmamsg_ep_get_protocols(self._core.c(), pr), "protocols")
        return Protocols(int(pr.max_inline), int(pr.eager),
                         int(pr.rndv_threshold), int(pr.max_msg),
                         int(pr.max_large), bool(pr.rndv_window))

    @property
    def window(self) -> Tuple[int, int]:
        """This endpoint's receive window (rdmamsg_ep_get_window): the
        data credits it grants its peer now and the most the window may
        grow to (recv_depth_max=).  NotConnected before the handshake
        completed."""
        now = ffi.new("uint32_t *")
        mx = ffi.new("uint32_t *")
        check(lib.rdmamsg_ep_get_window(self._core.c(), now, mx), "window")
        return int(now[0]), int(mx[0])

    @property
    def pack_limit(self) -> int:
        """The longest message this connection packs with others into one
        send when it queues them (rdmamsg_ep_get_pack_limit; 0: it does not
        pack).  NotConnected before the handshake completed."""
        n = ffi.new("size_t *")
        check(lib.rdmamsg_ep_get_pack_limit(self._core.c(), n), "pack_limit")
        return int(n[0])

    @property
    def late_responses(self) -> int:
        n = ffi.new("uint64_t *")
        check(lib.rdmamsg_ep_get_late_responses(self._core.c(), n))
        return int(n[0])

    # -- sending --------------------------------------------------------
    def _post(self, data: Any, imm: Optional[int], opid: int,
              nowait: bool = False) -> Tuple[int, Any]:
        """Post data (a send()'s, or with nowait a send_nowait()'s, whose
        caller may reuse a mutable buffer at once: not sent from in place
        then); (status, what to hold until the completion)."""
        core = self._core
        ep = core.c()
        opc = ffi.cast("void *", opid)
        if isinstance(data, PoolBuffer):
            if data._ctx is not core.ctx:
                raise ValueError("the PoolBuffer belongs to another context "
                                 "than the endpoint's")
            buf = data._take()
            data._only_view()
            n = data._nbytes
            if imm is None:
                rc = lib.rdmamsg_send_buf(ep, buf, n, opc)
            else:
                rc = lib.rdmamsg_send_buf_imm(ep, buf, n, imm, opc)
            if rc == 0:
                data._sent()
            else:
                data._untake()
            return rc, None
        p, n = _buf_ptr(data)
        if n <= core.max_msg or imm is not None:
            if imm is None:
                return lib.rdmamsg_send(ep, p, n, opc), p
            return lib.rdmamsg_send_imm(ep, p, n, imm, opc), p
        if n >= SEND_MR_THRESHOLD and core.tracked and \
                (not nowait or _immutable(data)):
            mrp = ffi.new("struct rdmamsg_mr **")
            if lib.rdmamsg_mr_reg(core.ctx._ctx, p, n,
                                  ACCESS_REMOTE_READ, mrp) == 0:
                keep = _TmpMr(p, mrp)
                rc = lib.rdmamsg_send_mr(ep, mrp[0], 0, n, opc)
                if rc < 0:
                    keep._op_done()
                return rc, keep
        return lib.rdmamsg_send_large(ep, p, n, opc), p

    async def send(self, data: Union[BufferLike, "PoolBuffer"], *,
                   imm: Optional[int] = None) -> None:
        """Send ``data`` (any bytes-like object, not copied by Python; or a
        PoolBuffer, sent without any copy) and wait until the peer has it.

        Messages above ``max_msg_size`` go by rendezvous (RDMA READ by the
        peer); from SEND_MR_THRESHOLD (4 MiB) the peer reads them from
        ``data`` itself, which must stay unchanged until the send returns,
        also when the await is cancelled (the read goes on).  Out of
        credits with a full backlog (or the pool, or the copies ahead of
        the peer, full), it waits for the endpoint to become writable
        (back-pressure).  Concurrent sending awaits of an
        endpoint (send, send_nocopy, sendv, request) go in the order they
        were started: once one waits for room the later ones wait behind
        it.  Cancelling the await does not unsend a message that went;
        one cancelled while it waits for room is not sent (and the others
        keep their order)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        opid = next(_op_ids) if core.tracked else 0
        if imm is None and opid and type(data) is bytes and \
                len(data) <= core.max_msg:
            n = len(data)
            rc = _EAGAIN if core.sendq else \
                self._send_eager(core, data, n, opid)
            if rc == _EAGAIN:
                rc = (await core.post_in_turn(
                    lambda: (self._send_eager(core, data, n, opid), None)))[0]
            check(rc, "send")
            fut = _Waiter(core.ctx)
            _ops[opid] = (fut, None)
            await fut
            return
        await self._send_posted(self._post, data, imm, opid, "send")

    async def _send_posted(self, post: Callable[[Any, Optional[int], int],
                                                Tuple[int, Any]],
                           data: Any, imm: Optional[int], opid: int,
                           what: str) -> None:
        """post(data, imm, opid) (_post or _post_nocopy) until it finds
        room, then (opid not 0) wait for the completion, holding what the
        post returned to keep until then."""
        core = self._core
        rc, keep = _REFUSED if core.sendq else post(data, imm, opid)
        if rc == _EAGAIN:
            rc, keep = await core.post_in_turn(lambda: post(data, imm, opid))
        check(rc, what)
        if not opid:  # track_sends=False: accepted is all there is to know
            core.ctx._kick()
            return
        fut = _Waiter(core.ctx)
        _ops[opid] = (fut, keep)
        # held by _ops until the completion, not by this frame (see
        # _Waiter.result: an export of data in a cycle is not collectable)
        keep = None
        core.ctx._kick()
        await fut

    def send_nowait(self, data: Union[BufferLike, "PoolBuffer"], *,
                    imm: Optional[int] = None) -> None:
        """Send without waiting for the completion; raises BlockingIOError
        (rdmamsg.WouldBlock) when out of credits with a full backlog: then
        ``await ep.wait_writable()``; also while sending awaits (send())
        wait for room, which it would overtake.  The caller may reuse its
        buffer at once, whatever the size (a mutable one is copied; send()
        of 4 MiB or more reads it in place until it returns)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        if core.sendq:
            check(_EAGAIN, "send")
        t = type(data)
        if imm is None and (t is bytes or t is memoryview or
                            not isinstance(data, PoolBuffer)):
            # the common case in one C call: nobody waits for the
            # completion (op_ctx 0: it never enters Python)
            if t is bytes:
                n = len(data)
                p = data
            elif t is memoryview and type(data.obj) is bytes and \
                    data.nbytes == len(data.obj):
                # all of a bytes object (a received message echoed back)
                p = data.obj
                n = len(p)
            else:
                p, n = _buf_ptr(data)
            if n <= core.max_msg:
                ep = core.ep
                ctx = core.ctx
                if ep is not None and not core.closing:
                    # the usual cases, _send_eager inlined
                    if ctx._in_pump:  # from a callback: the pass arms
                        rc = _c_send(_NULL, ep, p, n, 0, _NULL)
                        if rc < 0:
                            check(rc, "send")
                        return
                    if not (ctx._pump_scheduled or ctx._closing):
                        rc = _c_send(ctx._ctx, ep, p, n, 0, ctx._batch)
                        if rc > 0:
                            ctx._schedule()
                        elif rc < 0:
                            check(rc, "send")
                        return
                check(self._send_eager(core, p, n, 0), "send")
                return
        opid = next(_op_ids) if core.tracked else 0
        rc, keep = self._post(data, imm, opid, nowait=True)
        check(rc, "send")
        if isinstance(keep, _TmpMr):  # deregistered at the completion
            _ops[opid] = (None, keep)
        core.ctx._kick()

    def _post_nocopy(self, data: Any, imm: Optional[int],
                     opid: int) -> Tuple[int, Any]:
        """rdmamsg_send_nocopy[_imm] of data (a PoolBuffer: send_buf, as
        _post); on success what must stay referenced until on_send."""
        if isinstance(data, PoolBuffer):
            return self._post(data, imm, opid)
        core = self._core
        ep = core.c()
        p, n = _buf_ptr(data)
        opc = ffi.cast("void *", opid)
        if imm is None:
            rc = lib.rdmamsg_send_nocopy(ep, p, n, opc)
        else:
            rc = lib.rdmamsg_send_nocopy_imm(ep, p, n, imm, opc)
        if rc < 0:
            return rc, None
        return rc, _Pinned(p, core.ctx._region_of(p, n))

    async def send_nocopy(self, data: Union[BufferLike, "PoolBuffer"], *,
                          imm: Optional[int] = None) -> None:
        """Send ``data`` without copying it where the library can
        (rdmamsg_send_nocopy): above the connection's rendezvous threshold
        (``protocols.rndv_threshold``), when the bytes lie inside one
        region of this context registered with ACCESS_REMOTE_READ
        (``ctx.register(buf, rdmamsg.ACCESS_REMOTE_READ)``, e.g. a slice of
        its ``view``), the peer reads them where they are; otherwise they
        are copied as send() copies them (a PoolBuffer goes as send() sends
        it, without a copy).  The peer cannot tell the difference.

        Returns when the peer has the message (on_send).  The bytes must
        stay unchanged until then: changing them earlier is the caller's
        error, as in C (the peer may get either bytes).  The binding holds
        ``data`` (and keeps its region from deregistering: ``mr.close()``
        waits, ``mr.dereg()`` raises Busy) until the library is done with
        it, also when the await is cancelled, which does not unsend the
        message.  Waits for room when out of credits with a full backlog;
        raises the send's error as send() does.  On an endpoint made with
        ``track_sends=False`` (no completions) it is send()."""
        _check_own(self._core.ctx)
        if not self._core.tracked:
            await self.send(data, imm=imm)
            return
        await self._send_posted(self._post_nocopy, data, imm, next(_op_ids),
                                "send_nocopy")

    def _postv(self, pieces: Any, opid: int) -> int:
        """rdmamsg_sendv of the pieces (the library gathers them)."""
        if isinstance(pieces, (bytes, bytearray, memoryview, str)) or \
                not hasattr(pieces, "__len__"):
            raise TypeError("sendv takes a list (or tuple) of bytes-like "
                            "objects")
        n = len(pieces)
        if not 1 <= n <= IOV_MAX:
            raise make_error(-_errno.EINVAL, "sendv: %d pieces (1..%d)"
                             % (n, IOV_MAX))
        ep = self._core.c()
        iov = ffi.new("struct iovec[]", n)
        keep = []
        for i, piece in enumerate(pieces):
            p, size = _buf_ptr(piece)
            keep.append(p)
            iov[i].iov_base = p
            iov[i].iov_len = size
        return lib.rdmamsg_sendv(ep, iov, n, ffi.cast("void *", opid))

    async def sendv(self, pieces: Any) -> None:
        """Send the concatenation of ``pieces`` (a list or tuple of 1 to
        IOV_MAX bytes-like objects) as one message and wait until the peer
        has it, as send() does: the library gathers them with one copy
        (rdmamsg_sendv); the pieces may be reused once the call returns.
        Waits for room when out of credits with a full backlog, in turn
        with the other sending awaits (send())."""
        core = self._core
        _check_own(core.ctx)
        opid = next(_op_ids) if core.tracked else 0
        rc = _EAGAIN if core.sendq else self._postv(pieces, opid)
        if rc == _EAGAIN:
            rc = (await core.post_in_turn(
                lambda: (self._postv(pieces, opid), None)))[0]
        check(rc, "sendv")
        if not opid:
            core.ctx._kick()
            return
        fut = _Waiter(core.ctx)
        _ops[opid] = (fut, None)
        core.ctx._kick()
        await fut

    def sendv_nowait(self, pieces: Any) -> None:
        """sendv() without waiting for the completion; raises
        BlockingIOError when out of credits with a full backlog, or while
        sending awaits wait for room (as send_nowait())."""
        _check_own(self._core.ctx)
        rc = _EAGAIN if self._core.sendq else self._postv(pieces, 0)
        check(rc, "sendv")
        self._core.ctx._kick()

    @staticmethod
    def _send_eager(core: _EpCore, p: Any, n: int, opid: int) -> int:
        """rdmamsg_send of n bytes at p (bytes or a char[] of
        ffi.from_buffer) with op_ctx opid, and arm() in the same C call: a
        pass of the pump only when the library left work behind that the
        fd does not announce.  Returns the send's status."""
        ep = core.ep
        if ep is None or core.closing:
            core.c()  # raises
        ctx = core.ctx
        if ctx._in_pump or ctx._pump_scheduled or ctx._closing:
            rc = _c_send(_NULL, ep, p, n, opid, _NULL)
            if rc == 0:
                ctx._kick()
            return rc
        rc = _c_send(ctx._ctx, ep, p, n, opid, ctx._batch)
        if rc > 0:
            ctx._schedule()
            return 0
        return rc

    async def wait_writable(self) -> None:
        """Wait until a send that failed with BlockingIOError may succeed
        (room came, and no sending await waits for it before)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        core.c()
        await core.wait_writable()

    # -- receiving ------------------------------------------------------
    async def recv_msg(self) -> Message:
        """The next message with its immediate value and flags."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        if not core.queue:
            await _wait_item(core, core.recv_waiters, core.queue.__len__)
        payload, imm, flags = _item(core.queue.popleft())
        if type(payload) is bytes:
            payload = memoryview(payload)
        return Message(payload, imm if flags & RECV_IMM else None,
                       bool(flags & RECV_LARGE))

    async def recv(self) -> memoryview:
        """The next message as a memoryview: over the library's pool buffer
        for messages of at least ``keep_threshold`` bytes (given back when
        the view is released or collected), over a copy otherwise.  Raises
        EndOfStream once the peer closed and every message was read."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        q = core.queue
        while not q:  # _wait_item, inlined
            if core.end is None and not core.closing and \
                    core.receiver is None:  # _recv_waiter, inlined
                fut = _Waiter(core.ctx)
                core.recv_waiters.append(fut)
            else:
                fut = _recv_waiter(core)  # raises
            try:
                await fut
            except BaseException:
                _recv_unwait(core, fut)
                raise
        payload = q.popleft()
        t = type(payload)
        if t is bytes:
            return memoryview(payload)
        if t is tuple:
            payload = payload[0]
            if type(payload) is bytes:
                return memoryview(payload)
        return payload

    async def recv_bytes(self) -> bytes:
        """The next message copied to bytes (a kept buffer is released)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        if not core.queue:
            await _wait_item(core, core.recv_waiters, core.queue.__len__)
        payload = _item(core.queue.popleft())[0]
        if type(payload) is bytes:
            return payload
        b = payload.tobytes()
        payload.release()
        return b

    def __aiter__(self) -> AsyncIterator[memoryview]:
        return self

    async def __anext__(self) -> memoryview:
        """recv() (inlined), ending at EndOfStream or the endpoint's
        close."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        q = core.queue
        while not q:  # _wait_item, inlined
            if core.end is None and not core.closing and \
                    core.receiver is None:  # _recv_waiter, inlined
                fut = _Waiter(core.ctx)
                core.recv_waiters.append(fut)
            else:
                try:
                    fut = _recv_waiter(core)  # raises
                except (EndOfStream, OperationCanceled):
                    raise StopAsyncIteration from None
            try:
                await fut
            except BaseException:
                _recv_unwait(core, fut)
                raise
        payload = q.popleft()
        t = type(payload)
        if t is bytes:
            return memoryview(payload)
        if t is tuple:
            payload = payload[0]
            if type(payload) is bytes:
                return memoryview(payload)
        return payload

    # -- request/response ---------------------------------------------------
    async def request(self, data: BufferLike, *,
                      timeout: Optional[float] = None) -> bytes:
        """Send a request and return the peer's response (bytes).  Raises
        TimeoutError (rdmamsg.TimedOut) after ``timeout`` seconds;
        cancelling the await cancels the request (rdmamsg_request_cancel)
        and leaves the endpoint usable."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        ms = 0 if timeout is None else max(1, _ms(timeout))
        if ms > _UINT_MAX:
            raise make_error(-_errno.EINVAL, "request timeout")
        if type(data) is bytes:
            p = data
            n = len(data)
        else:
            p, n = _buf_ptr(data)
        opid = next(_op_ids)

        def post() -> Tuple[int, Any]:
            # rdmamsg_request, and arm() from outside a pass, in one C
            # call (as _send_eager)
            ep = core.ep
            if ep is None or core.closing:
                core.c()  # raises
            ctx = core.ctx
            if ctx._in_pump or ctx._pump_scheduled or ctx._closing:
                rc = _c_request(_NULL, ep, p, n, ms, opid, core.idp, _NULL)
                if rc == 0:
                    ctx._kick()
            else:
                rc = _c_request(ctx._ctx, ep, p, n, ms, opid, core.idp,
                                ctx._batch)
                if rc > 0:
                    ctx._schedule()
                    rc = 0
            return rc, None
        rc = _EAGAIN if core.sendq else post()[0]
        if rc == _EAGAIN:
            rc = (await core.post_in_turn(post))[0]
        if rc < 0:
            check(rc, "request")
        reqid = int(core.idp[0])
        fut = _Waiter(core.ctx)
        # the export of data (bytes need none) is held until the response
        # by _ops, not by this frame (see _Waiter.result)
        _ops[opid] = (fut, None if p is data else p)
        p = None
        try:
            return await fut
        except asyncio.CancelledError:
            if opid in _ops and core.ep is not None and not core.closing:
                lib.rdmamsg_request_cancel(core.ep, reqid)
                core.ctx._kick()
            raise

    def set_receiver(self, callback: Optional[Callable[
            [memoryview, Optional[int]], Any]]) -> None:
        """Deliver each message to ``callback(data, imm)`` (data a
        memoryview as recv() returns it, imm the immediate value or None)
        right where the library hands it over, instead of queueing it for
        recv(): like asyncio's Protocol.data_received, no future and no
        task step per message, the fastest way to consume messages.  The
        callback runs inside the context's progress pass: it must not
        block; it may send (``send_nowait``), close, or start tasks; an
        exception it raises goes to the loop's exception handler and the
        message counts as delivered (a KeyboardInterrupt or SystemExit
        leaves the loop's run once the pass is done).  Messages queued
        before are handed to it now, in order.  ``None`` restores the
        queue; recv() (and async for) raises RuntimeError while a
        callback is set, one waiting already included."""
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable or None")
        core = self._core
        core.receiver = callback
        while callback is not None and core.queue:
            payload, imm, flags = _item(core.queue.popleft())
            if type(payload) is bytes:
                payload = memoryview(payload)
            try:
                callback(payload, imm if flags & RECV_IMM else None)
            except Exception as exc:
                _report(exc, "exception in an rdmamsg receiver")
            callback = core.receiver  # the callback may have changed it
        if core.receiver is not None:
            _wake_all(core.recv_waiters)  # recv() now raises

    def set_request_handler(
            self, handler: Optional[Callable[[bytes], Any]]) -> None:
        """Answer the peer's requests with ``handler(data)`` (a function or
        a coroutine function returning bytes-like; None drops the
        request).  An exception it raises, or a result that cannot be
        sent, goes to the loop's exception handler and drops the request
        (the requester times out).  A response that finds no room (the
        pool short while the endpoint's other sends are in flight:
        rdmamsg_respond's -EAGAIN) goes at the next on_writable, in
        order.  Requests that arrived before are handed over now."""
        if handler is not None and not callable(handler):
            raise TypeError("request_handler must be callable or None")
        core = self._core
        core.request_handler = handler
        if handler is not None:
            while core.pending_requests:
                core._dispatch_request(core.pending_requests.popleft())

    async def recv_request(self) -> Request:
        """The peer's next request (when no handler is set)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        if not core.pending_requests:
            await _wait_item(core, core.request_waiters,
                             lambda: bool(core.pending_requests))
        return core.pending_requests.popleft()

    # -- one-sided ----------------------------------------------------------
    def _check_regions(self, mr: Any, rmr: Any) -> None:
        """The regions of a one-sided call: a MemoryRegion of this
        endpoint's context (mr None: an atomic, none) and a
        RemoteRegion."""
        if mr is not None:
            if not isinstance(mr, MemoryRegion):
                raise TypeError("mr must be a MemoryRegion (ctx.register()), "
                                "not %s" % type(mr).__name__)
            if mr._ctx is not self._core.ctx:
                raise ValueError("the MemoryRegion belongs to another context "
                                 "than the endpoint's")
        if not isinstance(rmr, RemoteRegion):
            raise TypeError("rmr must be a RemoteRegion (of the peer's "
                            "export), not %s" % type(rmr).__name__)

    async def _rma(self, post: Callable[[int], int], keep: Any) -> int:
        core = self._core
        _check_own(core.ctx)
        opid = next(_op_ids)
        while True:
            core.c()
            rc = post(opid)
            if rc != _EAGAIN:
                break
            # Send queue full: no on_writable follows, a completion frees
            # room; look again shortly (not a busy loop).
            await asyncio.sleep(0.001)
        check(rc)
        fut = _Waiter(core.ctx)
        if keep is not None:
            keep._op_start()
        _ops[opid] = (fut, keep)
        core.ctx._kick()
        return await fut

    async def write(self, mr: "MemoryRegion", rmr: "RemoteRegion", *,
                    offset: int = 0, remote_offset: int = 0,
                    length: Optional[int] = None,
                    imm: Optional[int] = None) -> None:
        """RDMA write ``length`` bytes (default: the rest of ``mr``) from
        ``mr`` at ``offset`` to ``rmr`` at ``remote_offset``; with ``imm``
        the peer's ``wait_write_imm()`` sees it."""
        self._check_regions(mr, rmr)
        if length is None:
            length = mr.size - offset
        _check_span(offset, length)
        _check_span(remote_offset, 0)
        ep = self._core.c()
        if imm is None:
            await self._rma(lambda i: lib.rdmamsg_write(
                ep, mr._c(), offset, rmr._c(), remote_offset, length,
                lib._py_on_rma, ffi.cast("void *", i)), mr)
        else:
            await self._rma(lambda i: lib.rdmamsg_write_imm(
                ep, mr._c(), offset, rmr._c(), remote_offset, length, imm,
                lib._py_on_rma, ffi.cast("void *", i)), mr)

    async def read(self, mr: "MemoryRegion", rmr: "RemoteRegion", *,
                   offset: int = 0, remote_offset: int = 0,
                   length: Optional[int] = None) -> None:
        """RDMA read ``length`` bytes from ``rmr`` into ``mr`` (which must
        wrap writable memory)."""
        self._check_regions(mr, rmr)
        if mr.readonly:
            raise TypeError("RDMA read into read-only memory")
        if length is None:
            length = mr.size - offset
        _check_span(offset, length)
        _check_span(remote_offset, 0)
        ep = self._core.c()
        await self._rma(lambda i: lib.rdmamsg_read(
            ep, mr._c(), offset, rmr._c(), remote_offset, length,
            lib._py_on_rma, ffi.cast("void *", i)), mr)

    async def atomic_cas(self, rmr: "RemoteRegion", offset: int,
                         compare: int, swap: int) -> int:
        """8-byte compare-and-swap at ``rmr``+``offset``; the old value."""
        self._check_regions(None, rmr)
        _check_span(offset, 0)
        ep = self._core.c()
        return await self._rma(lambda i: lib.rdmamsg_atomic_cas(
            ep, rmr._c(), offset, compare, swap, lib._py_on_rma,
            ffi.cast("void *", i)), None)

    async def atomic_fadd(self, rmr: "RemoteRegion", offset: int,
                          add: int) -> int:
        """8-byte fetch-and-add at ``rmr``+``offset``; the old value."""
        self._check_regions(None, rmr)
        _check_span(offset, 0)
        ep = self._core.c()
        return await self._rma(lambda i: lib.rdmamsg_atomic_fadd(
            ep, rmr._c(), offset, add, lib._py_on_rma,
            ffi.cast("void *", i)), None)

    async def wait_write_imm(self) -> Tuple[int, int]:
        """The next write-with-immediate of the peer: (imm, length)."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        if not core.write_imms:
            await _wait_item(core, core.write_imm_waiters,
                             lambda: bool(core.write_imms))
        return core.write_imms.popleft()

    # -- closing ------------------------------------------------------------
    def close_nowait(self) -> None:
        """Start closing; pending sends and requests fail with
        OperationCanceled (each exactly once)."""
        _check_own(self._core.ctx)
        self._core.close_nowait(user=True)

    async def close(self) -> None:
        """Close and wait until the library freed the endpoint."""
        _check_own(self._core.ctx)
        self._core.close_nowait(user=True)
        await asyncio.shield(self._core.closed_fut)

    async def wait_closed(self) -> None:
        """Wait until the endpoint is closed (by close(), the peer, or an
        error) and its resources are given back."""
        await asyncio.shield(self._core.closed_fut)

    async def __aenter__(self) -> "Endpoint":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.user_closed:
            return
        core.user_closed = True
        if core.ep is None:
            return
        warnings.warn("unclosed rdmamsg endpoint %r" % self, ResourceWarning,
                      source=self)
        if not core.loop.is_closed():
            _close_later(core.ctx, core.close_nowait, True)

    def __repr__(self) -> str:
        c = self._core
        st = "connected" if self.connected else (
            "closed" if c.ep is None else "closing")
        return "<rdmamsg.Endpoint %s>" % st


def _immutable(data: Any) -> bool:
    """data's bytes cannot change (bytes, or a view of all or part of
    bytes): safe to send from in place with nobody waiting."""
    return type(data) is bytes or (type(data) is memoryview and
                                   type(data.obj) is bytes)


def _check_span(off: int, length: int) -> None:
    if off < 0 or length < 0:
        raise ValueError("offsets and lengths cannot be negative")


class _Pinned:
    """What a send_nocopy holds until its on_send: the caller's bytes (p,
    from ffi.from_buffer, references them) and the MemoryRegion they lie
    in, if any, which stays registered meanwhile."""
    __slots__ = ("p", "mr")

    def __init__(self, p: Any, mr: Optional["MemoryRegion"]) -> None:
        self.p = p
        self.mr = mr
        if mr is not None:
            mr._op_start()

    def _op_done(self) -> None:
        if self.mr is not None:
            self.mr._op_done()
            self.mr = None
        self.p = None


class _TmpMr:
    """A registration made for one zero-copy rendezvous send."""
    __slots__ = ("p", "mrp")

    def __init__(self, p: Any, mrp: Any) -> None:
        self.p = p
        self.mrp = mrp

    def _op_done(self) -> None:
        # on_send runs before the library drops its hold on the region:
        # deregister from the loop, right after
        if self.mrp[0] != ffi.NULL and \
                lib.rdmamsg_mr_dereg(self.mrp) == _EBUSY:
            asyncio.get_running_loop().call_soon(self._op_done)


def _check_ep_args(keep_threshold: Any,
                   request_handler: Any) -> None:
    """The endpoint arguments that are not attributes, checked where they
    are given (a listener uses them at each request, inside a callback)."""
    if isinstance(keep_threshold, bool) or \
            not isinstance(keep_threshold, int):
        raise TypeError("keep_threshold must be an int (bytes)")
    if keep_threshold < 0:
        raise ValueError("keep_threshold cannot be negative")
    if request_handler is not None and not callable(request_handler):
        raise TypeError("request_handler must be callable or None")


async def connect(addr: Union[str, Tuple[str, int], list], *,
                  ctx: Optional[Context] = None,
                  private_data: Optional[BufferLike] = None,
                  request_handler: Optional[Callable[[bytes], Any]] = None,
                  keep_threshold: int = KEEP_THRESHOLD,
                  track_sends: bool = True,
                  **options: Any) -> Endpoint:
    """Connect to ``"host:port"`` (or ``(host, port)``) and return the
    Endpoint once the connection is up.

    ``ctx`` defaults to the running loop's context.  ``options`` are the
    endpoint attributes: connect_timeout, close_timeout, peer_timeout (in
    seconds), recv_depth, send_depth, send_backlog, eager_size,
    max_msg_size, max_large_size; ``linger=True`` (close sends the queued
    messages first, within the close timeout, instead of cancelling them);
    ``srq=`` a SharedReceiveQueue of the context to receive through;
    ``recv_alloc=fn`` chooses where each message that comes by rendezvous
    lands: ``fn(nbytes)`` returns None (the library's memory, copied to
    bytes as usual), a writable MemoryRegion of the context, or
    ``(region, offset)`` -- the message is then read by RDMA straight into
    it and recv() returns a memoryview of those bytes, no copy -- or
    raises OSError to refuse it (the sender's send fails with that
    errno).  Failure raises ConnectionRefusedError
    (with ``reason`` and ``private_data`` of the reject), TimeoutError,
    rdmamsg.HostUnreachable ...; cancelling closes the attempt.

    Path failover: ``addr`` may list several addresses of the peer, as
    ``"10.231.1.2:7000,10.231.2.2:7000"`` or a list of strings or
    ``(host, port)`` pairs (at most MAX_PATHS), with
    ``failover="reconnect"`` (the default ``"off"`` takes one address; a
    list without the policy, too many entries or a bad entry raise
    rdmamsg.InvalidArgument, a ValueError).  An attempt that fails
    because of its path (nobody listens, unreachable, timed out, reset
    before it was up) is tried again on the next address; the exception
    is the last attempt's.  ``on_path=fn`` is called with each
    ``PathEvent(event, path, status)`` -- PATH_DOWN, FAILOVER_START,
    FAILOVER_DONE, FAILOVER_FAILED -- inside the context's progress pass,
    before the connect completes: it must not block (a coroutine function
    runs as a task).  The events are also kept in ``ep.path_events`` and
    in the ``path_events`` of the exception of a failed connect;
    ``ep.path_stats()`` has the counters.  Only the connecting side fails
    over; with ``"reconnect"`` a connection that fails once up ends as
    without a policy.

    Reconnect and replay: with ``failover="replay"`` a connection that was
    up and fails while both processes live (retry exhaustion, a port
    error, the peer silent for the peer timeout, a reset without a
    goodbye) is reconnected -- PATH_DOWN, FAILOVER_START on the next
    address (wrapping around), FAILOVER_DONE -- within
    ``reconnect_timeout`` seconds (default 10) and ``reconnect_tries``
    attempts (default 16), and what the peer did not receive is sent
    again: no message is lost, delivered twice or reordered, and a request
    in flight is answered once.  The endpoint stays open meanwhile (sends
    queue within the send backlog); one-sided operations in flight fail
    with ConnectionResetError.  When the session cannot be resumed the
    endpoint ends with that error (ConnectionResetError when the peer
    restarted and refused the session, REJECT_SESSION).  The pair needs
    ``failover="replay"`` and values in range (InvalidArgument otherwise);
    private data is then at most HS_SESSION_USER bytes.  The accepting
    side needs no policy; its ``session_linger=`` (a listener option) is
    how long it waits for the reconnect.

    ``track_sends=False`` leaves out the per-send completion callback (the
    library then signals sends selectively: fewer wake-ups, a higher message
    rate); ``await ep.send()`` then returns once the library has taken the
    message, as ``writer.write()`` + ``drain()`` do for TCP.
    """
    if ctx is None:
        ctx = get_context()
    _check_own(ctx)
    _check_ep_args(keep_threshold, request_handler)
    caddr = _encode_addr(addr)
    for key in _LISTEN_ONLY:
        if options.get(key) is not None:
            raise TypeError("%s is an option of a listener, not of "
                            "connect()" % key)
    core = _EpCore(ctx, keep_threshold, request_handler, track_sends)
    core.set_objs(options)
    attrp = _make_ep_attr(options, private_data)
    try:
        epp = ffi.new("struct rdmamsg_ep **")
        rc = lib.rdmamsg_connect(ctx._c(), caddr, attrp[0],
                                 _ep_cbs(track_sends, keep_threshold),
                                 core.handle, epp)
    finally:
        lib.rdmamsg_ep_attr_delete(attrp)
    check(rc, "connect")
    core.ep = epp[0]
    core.add_to_ctx()
    fut = core.connect_fut
    assert fut is not None
    ctx._kick()
    try:
        await fut
    except BaseException:
        core.close_nowait(user=True)
        raise
    return Endpoint(core)


# ---------------------------------------------------------------------------
# Listeners and servers
# ---------------------------------------------------------------------------

AcceptFilter = Callable[[bytes], Union[None, bool, int, Tuple[int, bytes]]]


class _ListenerCore:
    def __init__(self, ctx: Context, accept_filter: Optional[AcceptFilter],
                 options: Dict[str, Any], accept_private_data: Any,
                 keep_threshold: int,
                 request_handler: Optional[Callable[[bytes], Any]],
                 track_sends: bool) -> None:
        self.ctx = ctx
        self.loop = ctx._loop
        self.handle = ffi.new_handle(self)
        self.track_sends = track_sends
        self.lst: Any = None
        self.accept_filter = accept_filter
        self.options = options
        self.accept_private_data = accept_private_data
        self.keep_threshold = keep_threshold
        self.request_handler = request_handler
        self.closing = False
        self.closed_fut: asyncio.Future = self.loop.create_future()
        self.accepted: Deque[_EpCore] = deque()
        self.waiters: Deque[asyncio.Future] = deque()
        self.on_endpoint: Optional[Callable[[_EpCore], None]] = None

    def _on_conn_req(self, req: Any, pdata: bytes) -> None:
        decision: Any = True
        if self.closing:
            decision = False
        elif self.accept_filter is not None:
            try:
                decision = self.accept_filter(pdata)
            except Exception as exc:
                _report(exc, "exception in an rdmamsg accept filter")
                decision = False
        if decision is None or decision is True:
            try:
                rc = self._accept(req)
            except Exception as exc:
                # the options cannot make an endpoint now (its SRQ was
                # closed ...): the request is rejected, not left undecided
                # for the client to time out
                _report(exc, "rdmamsg: accepting a connection request")
            else:
                if rc == 0:
                    return
                _report(make_error(rc), "rdmamsg_conn_req_accept")
            decision = 0xFFFF
        reason, rpdata = 0, b""
        try:
            if isinstance(decision, tuple):
                reason, rpdata = decision
            elif decision is not False:
                reason = decision
            if isinstance(reason, bool) or not isinstance(reason, int):
                raise TypeError("an accept filter returns None, True, "
                                "False, a reason (int) or (reason, bytes), "
                                "not %r" % (decision,))
            p, n = _buf_ptr(rpdata)
            rc = lib.rdmamsg_conn_req_reject(req, reason, p, n)
            if rc < 0:  # a reason outside 0..65535, too much data
                raise make_error(rc, "accept filter's reject")
        except Exception as exc:
            # the request must be decided all the same: rejected with
            # reason 0, as when the filter raises
            _report(exc, "bad result of an rdmamsg accept filter")
            lib.rdmamsg_conn_req_reject(req, 0, ffi.NULL, 0)

    def _accept(self, req: Any) -> int:
        """rdmamsg_conn_req_accept of req with the listener's options: 0
        (the endpoint is the context's), or the call's error."""
        core = _EpCore(self.ctx, self.keep_threshold, self.request_handler,
                       self.track_sends)
        core.connect_fut = None
        core.on_connected = self._connected
        core.set_objs(self.options)
        attrp = _make_ep_attr(self.options, self.accept_private_data)
        try:
            # an accepted endpoint of a REPLAY session reports its outages
            # too (ep.path_events); cannot fail on a made attribute
            lib.rdmamsg_ep_attr_set_path_cb(attrp[0], lib._py_on_path)
            epp = ffi.new("struct rdmamsg_ep **")
            rc = lib.rdmamsg_conn_req_accept(req, attrp[0], _ep_cbs(
                self.track_sends, self.keep_threshold), core.handle, epp)
        finally:
            lib.rdmamsg_ep_attr_delete(attrp)
        if rc == 0:
            core.ep = epp[0]
            core.add_to_ctx()
        return rc

    def _connected(self, core: _EpCore, status: int) -> None:
        if status != 0:
            core.close_nowait(user=True)
            return
        if self.closing:
            core.close_nowait(user=True)
        elif self.on_endpoint is not None:
            self.on_endpoint(core)
        else:
            self.accepted.append(core)
            _wake_one(self.waiters)

    def _on_closed(self) -> None:
        self.lst = None
        self.ctx._listeners.discard(self)
        _wake_all(self.waiters)
        if not self.closed_fut.done():
            self.closed_fut.set_result(None)
        if self.ctx._closing:
            self.loop.call_soon(self.ctx._try_destroy)

    def close_nowait(self) -> None:
        if self.closing:
            return
        self.closing = True
        while self.accepted:
            self.accepted.popleft().close_nowait(user=True)
        _wake_all(self.waiters)
        if self.lst is not None:
            lib.rdmamsg_listener_close(self.lst, lib._py_on_listener_closed)
            self.ctx._kick()


class Listener:
    """Accepts connections on an address: ``await lst.accept()`` gives the
    next connected Endpoint.  ``port`` is the bound port.  Close with
    ``await lst.close()`` or ``async with``."""

    def __init__(self, core: _ListenerCore) -> None:
        self._core = core
        p = ffi.new("uint16_t *")
        check(lib.rdmamsg_listener_get_port(core.lst, p))
        self.port: int = int(p[0])

    async def accept(self) -> Endpoint:
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        while not core.accepted:
            if core.closing:
                raise OperationCanceled(_errno.ECANCELED,
                                        "the listener is closed")
            fut = core.loop.create_future()
            core.waiters.append(fut)
            try:
                await fut
            except BaseException:
                fut.cancel()
                if core.accepted:
                    _wake_one(core.waiters)
                raise
        return Endpoint(core.accepted.popleft())

    def close_nowait(self) -> None:
        _check_own(self._core.ctx)
        self._core.close_nowait()

    async def close(self) -> None:
        """Stop listening (undecided requests are rejected) and wait."""
        _check_own(self._core.ctx)
        self._core.close_nowait()
        await asyncio.shield(self._core.closed_fut)

    async def __aenter__(self) -> "Listener":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.closing or core.lst is None:
            return
        warnings.warn("unclosed rdmamsg listener %r" % self, ResourceWarning,
                      source=self)
        if not core.loop.is_closed():
            _close_later(core.ctx, core.close_nowait)

    def __repr__(self) -> str:
        return "<rdmamsg.Listener port=%d>" % self.port


def _listen_core(addr: Union[str, Tuple[str, int]], ctx: Optional[Context],
                 accept: Optional[AcceptFilter],
                 accept_private_data: Optional[BufferLike],
                 keep_threshold: int,
                 request_handler: Optional[Callable[[bytes], Any]],
                 track_sends: bool,
                 options: Dict[str, Any]) -> _ListenerCore:
    if ctx is None:
        ctx = get_context()
    _check_own(ctx)
    _check_ep_args(keep_threshold, request_handler)
    if accept is not None and not callable(accept):
        raise TypeError("accept must be callable or None")
    caddr = _encode_addr(addr)
    for key in options:
        if key not in _EP_ATTRS and key not in _EP_OBJS:
            raise TypeError("unknown endpoint option %r" % key)
    # only the connecting side fails over (rdmamsg_conn_req_accept() with a
    # policy is -EINVAL): refused here, not at each request
    for key in ("on_path", "reconnect_timeout", "reconnect_tries"):
        if options.get(key) is not None:
            raise TypeError("%s is an option of connect(), not of a "
                            "listener" % key)
    if options.get("failover") is not None and \
            _failover(options["failover"]) != lib.RDMAMSG_FAILOVER_OFF:
        raise make_error(-_errno.EINVAL, "failover: only the connecting "
                         "side fails over")
    _make_ep_attr_check(options, accept_private_data)
    core = _ListenerCore(ctx, accept, options, accept_private_data,
                         keep_threshold, request_handler, track_sends)
    lp = ffi.new("struct rdmamsg_listener **")
    check(lib.rdmamsg_listen(ctx._c(), caddr, lib._py_on_conn_req,
                             core.handle, lp), "listen")
    core.lst = lp[0]
    ctx._listeners.add(core)
    ctx._kick()
    return core


def _make_ep_attr_check(options: Dict[str, Any], pdata: Any) -> None:
    """Refuse bad options at listen time, not at the first request."""
    lib.rdmamsg_ep_attr_delete(_make_ep_attr(options, pdata))


async def listen(addr: Union[str, Tuple[str, int]], *,
                 ctx: Optional[Context] = None,
                 accept: Optional[AcceptFilter] = None,
                 accept_private_data: Optional[BufferLike] = None,
                 keep_threshold: int = KEEP_THRESHOLD,
                 request_handler: Optional[Callable[[bytes], Any]] = None,
                 track_sends: bool = True,
                 **options: Any) -> Listener:
    """Listen on ``"host:port"`` (port 0 picks one: ``listener.port``).

    ``accept(private_data)`` decides on each connection request: None or
    True accepts, False rejects (reason 0), an int rejects with that reason
    (0..65535), ``(reason, private_data)`` adds reject private data.
    ``options`` are endpoint attributes as for ``connect()``.
    """
    return Listener(_listen_core(addr, ctx, accept, accept_private_data,
                                 keep_threshold, request_handler,
                                 track_sends, options))


class Server:
    """What ``start_server()`` returns: runs ``handler(ep)`` as a task for
    each connection and closes the endpoint when it returns."""

    def __init__(self, core: _ListenerCore,
                 handler: Callable[[Endpoint], Awaitable[Any]]) -> None:
        self._core = core
        self._handler = handler
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self._eps: Set[_EpCore] = set()
        core.on_endpoint = self._start
        p = ffi.new("uint16_t *")
        check(lib.rdmamsg_listener_get_port(core.lst, p))
        self.port: int = int(p[0])

    def _start(self, core: _EpCore) -> None:
        self._eps.add(core)
        task = core.loop.create_task(self._run(core))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, core: _EpCore) -> None:
        ep = Endpoint(core)
        try:
            await self._handler(ep)
        except (EndOfStream, OperationCanceled, ConnectionError):
            pass
        except Exception as exc:
            _report(exc, "exception in an rdmamsg server handler")
        finally:
            self._eps.discard(core)
            await ep.close()

    @property
    def connections(self) -> int:
        """Connections whose handler is running."""
        return len(self._tasks)

    def close(self) -> None:
        """Stop listening and close every open connection."""
        _check_own(self._core.ctx)
        self._core.close_nowait()
        for core in list(self._eps):
            core.close_nowait(user=True)

    async def wait_closed(self) -> None:
        """Wait until the listener and every handler finished."""
        await asyncio.shield(self._core.closed_fut)
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def serve_forever(self) -> None:
        await asyncio.shield(self._core.closed_fut)

    async def __aenter__(self) -> "Server":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
        await self.wait_closed()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.closing or core.lst is None:
            return
        warnings.warn("unclosed rdmamsg server %r" % self, ResourceWarning,
                      source=self)
        if not core.loop.is_closed():
            _close_later(core.ctx, self.close)


async def start_server(handler: Callable[[Endpoint], Awaitable[Any]],
                       addr: Union[str, Tuple[str, int]], *,
                       ctx: Optional[Context] = None,
                       accept: Optional[AcceptFilter] = None,
                       accept_private_data: Optional[BufferLike] = None,
                       keep_threshold: int = KEEP_THRESHOLD,
                       request_handler: Optional[Callable[[bytes], Any]] = None,
                       track_sends: bool = True,
                       **options: Any) -> Server:
    """Like ``asyncio.start_server``: ``await handler(ep)`` runs for each
    accepted connection; the endpoint is closed when it returns.
    ``request_handler(data) -> bytes`` answers requests on every
    connection.  Other arguments as for ``listen()``."""
    if not callable(handler):
        raise TypeError("handler must be callable (a coroutine function)")
    core = _listen_core(addr, ctx, accept, accept_private_data,
                        keep_threshold, request_handler, track_sends, options)
    return Server(core, handler)


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------

class PoolBuffer:
    """A registered buffer from the context's pool (``ctx.alloc(size)``).

    Fill ``view`` and send it with ``ep.send(buf)`` (all of it) or after
    ``buf.nbytes = n``: the send takes it without a copy, and the buffer
    then belongs to the library (``view`` is released).  A send while
    another view of the memory (a slice of ``view``, an export of it) is
    referenced raises ValueError: the library reuses the memory.  Unsent
    buffers go back with ``close()`` or when collected, once no view over
    them (a slice of ``view`` included) is left."""

    def __init__(self, ctx: Context, buf: Any) -> None:
        self._ctx = ctx
        self._buf = buf
        ctx._bufs += 1
        dp = ffi.new("void **")
        sp = ffi.new("size_t *")
        lib.rdmamsg_buf_get_data(buf, dp)
        lib.rdmamsg_buf_get_size(buf, sp)
        self.size: int = int(sp[0])
        self._nbytes = self.size
        # the views (slices of view too) hold p; the buffer goes back to
        # the pool (unless sent) and the context's count drops when the
        # last of them goes, never under a view still in use
        self._rel = _BufRelease(ctx, buf)
        p = ffi.gc(ffi.cast("char *", dp[0]), self._rel, self.size)
        # the exporter of view: counted at a send (_only_view)
        self._fb: Any = ffi.buffer(p, self.size)
        self.view: memoryview = memoryview(self._fb)

    @property
    def nbytes(self) -> int:
        """How many bytes a send takes (default: all)."""
        return self._nbytes

    @nbytes.setter
    def nbytes(self, n: int) -> None:
        if not 0 <= n <= self.size:
            raise ValueError("nbytes must be within 0..%d" % self.size)
        self._nbytes = n

    def _take(self) -> Any:
        if self._buf is None:
            raise ValueError("the pool buffer was sent or closed already")
        return self._buf

    def _untake(self) -> None:
        pass

    def _only_view(self) -> None:
        """Refuse (ValueError) a send while a view over the memory other
        than ``view`` -- a slice, a view of it, an export of it -- is
        referenced: sent, the memory is the library's, which reuses it
        once the send completed, and such a view would read and write
        another buffer's bytes.  ``view`` is made anew (it stays the
        caller's until the send succeeds)."""
        try:
            self.view.release()  # BufferError: exported (from_buffer ...)
        except BufferError:
            alone = False
        else:
            # _fb: ours and the argument's, and a slice's (or another
            # view's) managed buffer, which outlives view's release (no
            # local of it here: the traceback of the error would hold it)
            alone = sys.getrefcount(self._fb) <= 2
            self.view = memoryview(self._fb)
        if not alone:
            raise ValueError("the PoolBuffer cannot be sent while a view "
                             "of its memory other than buf.view (a slice, "
                             "an export) is referenced: release it first")

    def _let_go(self) -> None:
        self._buf = None
        self._fb = None
        try:
            self.view.release()
        except BufferError:  # exported: freed when that goes
            pass

    def _sent(self) -> None:
        self._rel.buf = None  # the library's now: only the count drops
        self._let_go()

    def close(self) -> None:
        """Give the buffer back to the pool (no-op once sent); views over
        it that are still referenced keep it until they go."""
        if self._buf is not None:
            self._let_go()

    def __del__(self) -> None:
        if getattr(self, "_buf", None) is not None:
            self.close()


#: access that lets a peer change the memory
_REMOTE_CHANGE = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC


def _check_access(readonly: bool, access: int) -> None:
    """Read-only memory (bytes, a read-only view) is not registered for
    a peer to write to: it would change an immutable object."""
    if readonly and access & _REMOTE_CHANGE:
        raise TypeError("read-only memory cannot be registered with "
                        "ACCESS_REMOTE_WRITE or ACCESS_REMOTE_ATOMIC")


class MemoryRegion:
    """Memory of a bytes-like object registered for one-sided operations.

    ``export()`` gives the bytes a peer imports with ``RemoteRegion``;
    ``view`` is a memoryview of the memory.  The object stays referenced
    (and a bytearray cannot be resized) until the region is deregistered
    (``close()`` once unused, ``dereg()``), which releases ``view`` and
    gives the object back (slices of ``view`` taken before keep it);
    ``alloc_region()``'s ``view``, memory of its own, stays usable."""

    def __init__(self, ctx: Context, buffer: BufferLike, access: int) -> None:
        mv = memoryview(buffer)
        _check_access(mv.readonly, access)
        p = ffi.from_buffer("char[]", buffer, require_writable=not mv.readonly)
        self._init(ctx, access, mv.readonly, p, mv.nbytes, mv)
        self._reg(lib.rdmamsg_mr_reg(ctx._c(), p, self.size, access,
                                     self._mrp), "rdmamsg_mr_reg")

    def _init(self, ctx: Context, access: int, readonly: bool, p: Any,
              size: int, view: Optional[memoryview]) -> None:
        self.readonly: bool = readonly
        self.access: int = access
        self._p = p  # the memory (a list of pieces for register_iov)
        self.size: int = size
        #: the memory; None for a region of pieces (register_iov/_strided)
        self.view: Optional[memoryview] = view
        self._mrp = ffi.new("struct rdmamsg_mr **")
        self._inflight = 0
        self._closing = True  # nothing to close until registered
        self._ctx = ctx
        self._own = False  # alloc_region(): the memory is the region's

    def _reg(self, rc: int, what: str) -> None:
        check(rc, what)
        self._closing = False
        self._ctx._mrs.add(self)

    @classmethod
    def _pieces(cls, ctx: Context, buffers: Any,
                access: int) -> "MemoryRegion":
        """ctx.register_iov()"""
        if isinstance(buffers, (bytes, bytearray, memoryview, str)) or \
                not hasattr(buffers, "__len__"):
            raise TypeError("register_iov takes a list (or tuple) of "
                            "bytes-like objects")
        n = len(buffers)
        iov = ffi.new("struct iovec[]", n)
        keep = []
        readonly = False
        for i, b in enumerate(buffers):
            mv = memoryview(b)
            readonly = readonly or mv.readonly
            _check_access(readonly, access)
            p = ffi.from_buffer("char[]", b, require_writable=not mv.readonly)
            keep.append(p)
            iov[i].iov_base = p
            iov[i].iov_len = mv.nbytes
        mr = cls.__new__(cls)
        mr._init(ctx, access, readonly, keep,
                 sum(int(iov[i].iov_len) for i in range(n)), None)
        mr._reg(lib.rdmamsg_mr_reg_iov(ctx._c(), iov, n, access, mr._mrp),
                "rdmamsg_mr_reg_iov")
        return mr

    @classmethod
    def _strided(cls, ctx: Context, buffer: BufferLike, block: int,
                 stride: int, count: int, access: int) -> "MemoryRegion":
        """ctx.register_strided()"""
        for v, name in ((block, "block"), (stride, "stride"),
                        (count, "count")):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError("%s must be an int" % name)
            if v < 0:
                raise ValueError("%s cannot be negative" % name)
        mv = memoryview(buffer)
        _check_access(mv.readonly, access)
        if count and block and stride * (count - 1) + block > mv.nbytes:
            raise ValueError("%d blocks of %d bytes %d apart reach past the "
                             "%d-byte buffer" % (count, block, stride,
                                                 mv.nbytes))
        p = ffi.from_buffer("char[]", buffer, require_writable=not mv.readonly)
        mr = cls.__new__(cls)
        mr._init(ctx, access, mv.readonly, [p], block * count, None)
        mr._reg(lib.rdmamsg_mr_reg_strided(ctx._c(), p, block, stride, count,
                                           access, mr._mrp),
                "rdmamsg_mr_reg_strided")
        return mr

    @property
    def layout(self) -> str:
        """How the library serves the region (rdmamsg_mr_get_layout):
        "contig" (register()), "umr" (pieces under one key: a peer
        reaches all of them in one operation) or "sge" (pieces as an SGE
        list, on a device without UMR: local use of ranges of at most 2
        pieces, no export)."""
        lay = ffi.new("enum rdmamsg_mr_layout *")
        check(lib.rdmamsg_mr_get_layout(self._c(), lay), "layout")
        return {lib.RDMAMSG_MR_LAYOUT_CONTIG: "contig",
                lib.RDMAMSG_MR_LAYOUT_UMR: "umr",
                lib.RDMAMSG_MR_LAYOUT_SGE: "sge"}[lay[0]]

    def _c(self) -> Any:
        if self._closing or self._mrp[0] == ffi.NULL:
            raise ValueError("the memory region is closed")
        return self._mrp[0]

    def export(self) -> bytes:
        """RDMAMSG_MR_EXPORT_SIZE opaque bytes for a peer."""
        out = ffi.new("char[]", MR_EXPORT_SIZE)
        check(lib.rdmamsg_mr_export(self._c(), out, MR_EXPORT_SIZE))
        return ffi.buffer(out, MR_EXPORT_SIZE)[:]

    def _op_start(self) -> None:
        self._inflight += 1

    def _op_done(self) -> None:
        self._inflight -= 1
        if self._closing and self._inflight == 0:
            self._dereg()

    def _dereg(self) -> None:
        if self._mrp[0] != ffi.NULL:
            if lib.rdmamsg_mr_dereg(self._mrp) == _EBUSY:
                # an operation's callback is still unwinding: next pass
                self._ctx._loop.call_soon(self._dereg)
                return
        self._gone()

    def _gone(self) -> None:
        """Deregistered: the caller's buffer is the caller's again (a
        bytearray may be resized, a memoryview released); the memory of
        alloc_region() stays in view."""
        if not self._own:
            self._p = None  # the exports of ffi.from_buffer
            if self.view is not None:
                try:
                    self.view.release()  # slices of it keep what they need
                except BufferError:  # exported (another region ...)
                    pass
        self._ctx._mrs.discard(self)
        if self._ctx._closing:
            self._ctx._loop.call_soon(self._ctx._try_destroy)

    def dereg(self) -> None:
        """Deregister now (rdmamsg_mr_dereg), unlike close(), which waits
        for the operations using the region.  Raises rdmamsg.Busy (a
        BlockingIOError, EBUSY) while the library still uses it (a
        one-sided operation, a send_nocopy that the peer reads from it):
        the region then stays registered and usable.  Nothing once
        closed."""
        if self._closing:
            return
        _check_own(self._ctx)
        check(lib.rdmamsg_mr_dereg(self._mrp), "rdmamsg_mr_dereg")
        self._closing = True
        self._gone()

    def close(self) -> None:
        """Deregister (once operations using it have completed)."""
        if self._closing:
            return
        _check_own(self._ctx)
        self._closing = True
        if self._inflight == 0:
            self._dereg()

    def __enter__(self) -> "MemoryRegion":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_closing", True):
            return
        warnings.warn("unclosed rdmamsg memory region", ResourceWarning,
                      source=self)
        _close_later(self._ctx, self.close)


class RemoteRegion:
    """A peer's memory region, from the bytes of its ``export()``."""

    def __init__(self, export: BufferLike) -> None:
        p, n = _buf_ptr(export)
        self._rmrp = ffi.new("struct rdmamsg_rmr **")
        check(lib.rdmamsg_rmr_import(p, n, self._rmrp), "rdmamsg_rmr_import")
        sp = ffi.new("size_t *")
        lib.rdmamsg_rmr_get_size(self._rmrp[0], sp)
        self.size: int = int(sp[0])

    def _c(self) -> Any:
        if self._rmrp[0] == ffi.NULL:
            raise ValueError("the remote region is closed")
        return self._rmrp[0]

    def close(self) -> None:
        if self._rmrp[0] != ffi.NULL:
            lib.rdmamsg_rmr_free(self._rmrp)

    def __del__(self) -> None:
        if getattr(self, "_rmrp", None) is not None:
            self.close()


# ---------------------------------------------------------------------------
# Shared receive queues
# ---------------------------------------------------------------------------

class SrqStats(NamedTuple):
    """What ``SharedReceiveQueue.query()`` reports (rdmamsg_srq_query)."""
    endpoints: int      # endpoints holding a window
    reserved: int       # buffers of their windows
    bufs: int           # buffers allocated (at most max_bufs)
    posted: int         # buffers posted to the SRQ now
    registered: int     # pool bytes of the allocated buffers
    limit_events: int   # SRQ limit events seen


class _SrqCore:
    """The SRQ's state, kept by its context until its close callback ran
    (the user's wrapper may be collected before)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.srq: Any = None
        self.handle = ffi.new_handle(self)
        self.closing = False
        self.closed_fut: asyncio.Future = ctx._loop.create_future()

    def close_nowait(self) -> None:
        if self.closing or self.srq is None:
            return
        self.closing = True
        rc = lib.rdmamsg_srq_close(self.srq, lib._py_on_srq_closed,
                                   self.handle)
        if rc < 0 and rc != -_errno.EALREADY:
            _report(make_error(rc), "rdmamsg_srq_close")
        self.ctx._kick()

    def _on_closed(self) -> None:
        self.srq = None
        ctx = self.ctx
        ctx._srqs.discard(self)
        if not self.closed_fut.done():
            self.closed_fut.set_result(None)
        if ctx._closing:
            ctx._loop.call_soon(ctx._try_destroy)


class SharedReceiveQueue:
    """A shared receive queue of a context (``ctx.create_srq()``).

    Endpoints made with ``srq=`` this queue (``connect``, ``listen`` and
    ``start_server``, whose accepted endpoints all share it) receive
    through it: each takes a window of its receive depth (plus 3 control
    credits) out of the queue's ``max_bufs`` buffers, lossless (a sender
    never finds it empty).  A connect or accept beyond ``max_bufs`` fails
    with ENOBUFS (``rdmamsg.OutOfMemory``).  ``query()`` gives its
    counters.  Close with ``await srq.close()`` or ``async with``: no new
    endpoint may use it, and it is freed once the last endpoint using it
    is; an SRQ collected open is closed with a ResourceWarning."""

    def __init__(self, ctx: Context, max_bufs: int, buf_size: int) -> None:
        attr = ffi.new("struct rdmamsg_srq_attr *")
        attr.max_bufs = _uint(max_bufs, "max_bufs")
        if isinstance(buf_size, bool) or not isinstance(buf_size, int):
            raise TypeError("buf_size must be an int")
        if buf_size < 0:
            raise ValueError("buf_size cannot be negative")
        attr.buf_size = buf_size
        core = _SrqCore(ctx)
        pp = ffi.new("struct rdmamsg_srq **")
        check(lib.rdmamsg_srq_create(ctx._c(), attr, pp),
              "rdmamsg_srq_create")
        core.srq = pp[0]
        ctx._srqs.add(core)
        self._core = core
        self.max_bufs: int = max_bufs
        self.buf_size: int = buf_size

    def _c(self) -> Any:
        core = self._core
        if core.closing or core.srq is None:
            raise ValueError("the shared receive queue is closed")
        return core.srq

    @property
    def closed(self) -> bool:
        return self._core.closing

    def query(self) -> SrqStats:
        """The queue's counters now."""
        st = ffi.new("struct rdmamsg_srq_stats *")
        srq = self._core.srq
        if srq is None:
            raise ValueError("the shared receive queue is closed")
        check(lib.rdmamsg_srq_query(srq, st), "rdmamsg_srq_query")
        return SrqStats(int(st.endpoints), int(st.reserved), int(st.bufs),
                        int(st.posted), int(st.registered),
                        int(st.limit_events))

    def close_nowait(self) -> None:
        """Start closing (see close())."""
        _check_own(self._core.ctx)
        self._core.close_nowait()

    async def close(self) -> None:
        """Close, and wait until the last endpoint using the queue is
        freed and the queue with it (close the endpoints to get there)."""
        _check_own(self._core.ctx)
        self._core.close_nowait()
        await asyncio.shield(self._core.closed_fut)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._core.closed_fut)

    async def __aenter__(self) -> "SharedReceiveQueue":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.closing or core.srq is None:
            return
        warnings.warn("unclosed rdmamsg shared receive queue %r" % self,
                      ResourceWarning, source=self)
        if not core.ctx._loop.is_closed():
            _close_later(core.ctx, core.close_nowait)

    def __repr__(self) -> str:
        return "<rdmamsg.SharedReceiveQueue max_bufs=%d buf_size=%d%s>" % (
            self.max_bufs, self.buf_size,
            " closed" if self._core.closing else "")


# ---------------------------------------------------------------------------
# Multicast groups
# ---------------------------------------------------------------------------

class GroupMessage(NamedTuple):
    """A message received from a group: its publisher's id (that member's
    ``Group.id``), its sequence number (from 0 per publisher, consecutive
    unless a GroupLoss came between) and its bytes (a copy: the library
    lends them only for the callback)."""
    publisher: int
    seq: int
    data: bytes


class GroupLoss(NamedTuple):
    """Messages ``first`` .. ``first + count - 1`` of ``publisher`` are lost
    (reported once, before the message after the gap)."""
    publisher: int
    first: int
    count: int


class GroupStats(NamedTuple):
    """What ``Group.query()`` reports (rdmamsg_group_query)."""
    msgs_published: int
    bytes_published: int
    msgs_received: int
    bytes_received: int
    datagrams_sent: int
    datagrams_received: int
    heartbeats_sent: int
    gaps: int                  # loss reports
    msgs_lost: int             # messages in them
    duplicates: int            # datagrams dropped as already seen
    malformed: int             # datagrams dropped as not ours / bad
    publishers: int            # publishers heard of
    naks_sent: int             # reliable mode ...
    naks_received: int
    repairs: int               # messages sent again: both of
    repairs_unicast: int       # to the one subscriber that asked
    repairs_multicast: int     # to the group
    flow_control_stalls: int   # publishes refused with -EAGAIN
    receivers: int             # reliable publisher: subscribers it waits for
    mtu: int                   # payload bytes per datagram
    lost_fragments: int        # datagrams of messages already lost
    published_in_repair: int   # published while a repair waited


def _group_stats(st: Any) -> GroupStats:
    return GroupStats(*(int(getattr(st, f)) for f in GroupStats._fields))


_ROLES = {"publisher": lib.RDMAMSG_GROUP_PUBLISHER,
          "subscriber": lib.RDMAMSG_GROUP_SUBSCRIBER,
          "both": lib.RDMAMSG_GROUP_PUBLISHER | lib.RDMAMSG_GROUP_SUBSCRIBER}
_FLOWS = {"min": lib.RDMAMSG_GROUP_FLOW_MIN, "max": lib.RDMAMSG_GROUP_FLOW_MAX,
          "tagged": lib.RDMAMSG_GROUP_FLOW_TAGGED}


@ffi.def_extern(onerror=_cb_error)
def _py_on_join(g, status, arg):  # type: ignore
    ffi.from_handle(arg)._on_join(status)


@ffi.def_extern(onerror=_cb_error)
def _py_on_message(g, msg, arg):  # type: ignore
    ffi.from_handle(arg)._on_message(
        GroupMessage(int(msg.publisher), int(msg.seq),
                     ffi.buffer(msg.data, msg.len)[:]))


@ffi.def_extern(onerror=_cb_error)
def _py_on_loss(g, publisher, first, count, arg):  # type: ignore
    ffi.from_handle(arg)._on_loss(GroupLoss(int(publisher), int(first),
                                            int(count)))


@ffi.def_extern(onerror=_cb_error)
def _py_on_publish(g, op_ctx, status, arg):  # type: ignore
    core = ffi.from_handle(arg)
    opid = int(ffi.cast("uintptr_t", op_ctx))
    if status < 0:
        core.publish_errors += 1
    if opid:
        _finish(opid, status, None)
    if core.writers:  # a completion made room in the send queue
        _wake_all(core.writers)


@ffi.def_extern(onerror=_cb_error)
def _py_on_group_closed(g, arg):  # type: ignore
    ffi.from_handle(arg)._on_closed(g)


_group_cbs = ffi.new("struct rdmamsg_group_cbs *")
_group_cbs.on_join = lib._py_on_join
_group_cbs.on_message = lib._py_on_message
_group_cbs.on_loss = lib._py_on_loss
# completions of publish_nowait() that succeeded stay in C
_group_cbs.on_publish = ffi.addressof(lib, "_rdmamsg_py_on_publish")


class _GroupCore:
    """The group's state, kept by its context until its close callback ran
    (the user's Group wrapper may be collected before)."""

    def __init__(self, ctx: Context, role: int, loss_items: bool,
                 on_loss: Optional[Callable[[GroupLoss], Any]],
                 max_queue: Optional[int]) -> None:
        self.ctx = ctx
        self.loop = ctx._loop
        self.g: Any = None
        self.handle = ffi.new_handle(self)
        self.role = role
        self.join_fut: Optional[asyncio.Future] = self.loop.create_future()
        self.closed_fut: asyncio.Future = self.loop.create_future()
        self.closing = False
        self.user_closed = False
        self.dead: Optional[int] = None  # the join's failure
        # GroupMessage, or GroupLoss with loss_items
        self.queue: Deque[Any] = deque()
        self.recv_waiters: Deque[asyncio.Future] = deque()
        self.writers: Deque[asyncio.Future] = deque()
        self.receiver: Optional[Callable[[GroupMessage], Any]] = None
        self.loss_items = loss_items
        self.on_loss = on_loss
        self.max_queue = max_queue
        self.received = 0   # messages delivered to Python
        self.lost = 0       # messages reported lost (and dropped, below)
        self.gaps = 0       # loss reports
        self.dropped = 0    # messages dropped because the queue was full
        self.publish_errors = 0
        self.id = 0
        self.final_stats: Optional[GroupStats] = None

    # -- callbacks ----------------------------------------------------------
    def _on_join(self, status: int) -> None:
        fut = self.join_fut
        self.join_fut = None
        if status < 0:
            self.dead = status
            self.close_nowait(user=False)
        if fut is not None and not fut.done():
            if status < 0:
                fut.set_exception(make_error(status, "join"))
            else:
                fut.set_result(None)

    def _on_message(self, m: GroupMessage) -> None:
        if self.user_closed:
            return
        self.received += 1
        if self.receiver is not None:
            self.receiver(m)
            return
        if self.max_queue is not None and \
                len(self.queue) >= self.max_queue:
            # a consumer that falls behind: the message is lost here, and
            # reported as such (received + lost stays == published)
            self.received -= 1
            self.dropped += 1
            self._on_loss(GroupLoss(m.publisher, m.seq, 1), merge=True)
            return
        self.queue.append(m)
        _wake_one(self.recv_waiters)

    def _on_loss(self, loss: GroupLoss, merge: bool = False) -> None:
        if self.user_closed:
            return
        self.lost += loss.count
        if not merge:
            self.gaps += 1
        if self.on_loss is not None:
            try:
                self.on_loss(loss)
            except Exception as exc:  # the loss is queued all the same
                _report(exc, "exception in an rdmamsg on_loss callback")
        if not self.loss_items:
            return
        q = self.queue
        if merge and q:
            last = q[-1]
            if type(last) is GroupLoss and \
                    last.publisher == loss.publisher and \
                    last.first + last.count == loss.first:
                q[-1] = GroupLoss(last.publisher, last.first,
                                  last.count + loss.count)
                return
        q.append(loss)
        _wake_one(self.recv_waiters)

    def _on_closed(self, g: Any) -> None:
        # the last counters, for query() after the close (g is freed once
        # this callback returns)
        st = ffi.new("struct rdmamsg_group_stats *")
        if lib.rdmamsg_group_query(g, st) == 0:
            self.final_stats = _group_stats(st)
        self.g = None
        _wake_all(self.recv_waiters)
        _wake_all(self.writers)
        fut = self.join_fut
        self.join_fut = None
        if fut is not None and not fut.done():
            fut.set_exception(OperationCanceled(_errno.ECANCELED,
                                                "closed while joining"))
        if not self.closed_fut.done():
            self.closed_fut.set_result(None)
        ctx = self.ctx
        ctx._groups.discard(self)
        ctx._group_waiting.discard(self)
        if ctx._closing:
            self.loop.call_soon(ctx._try_destroy)

    # -- calls ------------------------------------------------------------
    def close_nowait(self, user: bool) -> None:
        if user:
            self.user_closed = True
            self.queue.clear()
        if self.closing or self.g is None:
            return
        self.closing = True
        rc = lib.rdmamsg_group_close(self.g, lib._py_on_group_closed)
        if rc < 0 and rc != -_errno.EALREADY:
            _report(make_error(rc), "rdmamsg_group_close")
        _wake_all(self.recv_waiters)
        _wake_all(self.writers)
        self.ctx._kick()

    def end_error(self) -> BaseException:
        if self.dead is not None:
            return make_error(self.dead, "the group's join failed")
        return OperationCanceled(_errno.ECANCELED, "the group is closed")


def _group_attr(attrp: Any, role: str, max_msg_size: Optional[int],
                bind_addr: Optional[str], recv_depth: Optional[int],
                send_depth: Optional[int], heartbeat: Optional[float],
                reliable: int, flow: str, flow_tag: int,
                tag: Optional[int], min_receivers: int, batch: bool,
                poll_us: Optional[int]) -> None:
    attr = attrp[0]
    check(lib.rdmamsg_group_attr_set_role(attr, _ROLES[role]), "role")
    if max_msg_size is not None:
        if isinstance(max_msg_size, bool) or \
                not isinstance(max_msg_size, int):
            raise TypeError("max_msg_size must be an int")
        if max_msg_size < 0:
            raise ValueError("max_msg_size cannot be negative")
        check(lib.rdmamsg_group_attr_set_max_msg_size(attr, max_msg_size),
              "max_msg_size")
    if bind_addr is not None:
        check(lib.rdmamsg_group_attr_set_bind_addr(
            attr, _cstr(bind_addr, "bind_addr")), "bind_addr")
    if recv_depth is not None:
        check(lib.rdmamsg_group_attr_set_recv_depth(
            attr, _uint(recv_depth, "recv_depth")), "recv_depth")
    if send_depth is not None:
        check(lib.rdmamsg_group_attr_set_send_depth(
            attr, _uint(send_depth, "send_depth")), "send_depth")
    if heartbeat is not None:
        if isinstance(heartbeat, bool) or \
                not isinstance(heartbeat, (int, float)):
            raise TypeError("heartbeat must be a number of seconds")
        check(lib.rdmamsg_group_attr_set_heartbeat(
            attr, _uint(_ms(heartbeat), "heartbeat")), "heartbeat")
    check(lib.rdmamsg_group_attr_set_reliable(
        attr, _uint(reliable, "reliable")), "reliable")
    check(lib.rdmamsg_group_attr_set_flow_control(
        attr, _FLOWS[flow], _uint(flow_tag, "flow_tag")), "flow")
    if tag is not None:
        check(lib.rdmamsg_group_attr_set_tag(attr, _uint(tag, "tag")), "tag")
    check(lib.rdmamsg_group_attr_set_min_receivers(
        attr, _uint(min_receivers, "min_receivers")), "min_receivers")
    if not isinstance(batch, bool):
        raise TypeError("batch must be a bool")
    check(lib.rdmamsg_group_attr_set_batch(attr, int(batch)), "batch")
    if poll_us is not None:
        check(lib.rdmamsg_group_attr_set_poll_us(
            attr, _uint(poll_us, "poll_us")), "poll_us")


async def join(addr: str, *, ctx: Optional[Context] = None,
               role: str = "both", max_msg_size: Optional[int] = None,
               bind_addr: Optional[str] = None,
               recv_depth: Optional[int] = None,
               send_depth: Optional[int] = None,
               heartbeat: Optional[float] = None, reliable: int = 0,
               flow: str = "min", flow_tag: int = 0,
               tag: Optional[int] = None, min_receivers: int = 0,
               batch: bool = True,
               poll_us: Optional[int] = None, loss_items: bool = False,
               on_loss: Optional[Callable[[GroupLoss], Any]] = None,
               max_queue: Optional[int] = None) -> "Group":
    """Join the multicast group at ``addr`` (a numeric IPv4 or IPv6
    multicast address: "239.1.2.3", "ff0e::1" or "[ff0e::1]"; no port)
    through ``ctx`` (the running loop's default context if None) and
    return the joined ``Group`` (rdmamsg_group_join + on_join).

    ``role``: "publisher", "subscriber" or "both" (the default; a member
    does not receive its own messages).  ``max_msg_size`` (bytes, default
    64 KiB, at most 16 MiB), ``bind_addr`` (the local address to join
    from), ``recv_depth``/``send_depth`` (16..16384), ``heartbeat`` (the
    idle publisher's heartbeat period in seconds, default 0.1):
    rdmamsg_group_attr_set_*.  ``reliable=window`` turns reliable mode on
    (1..65536 messages kept for repair; every member of the group must
    agree); ``flow`` is its flow control, "min" (wait for the slowest
    subscriber), "max" (the fastest) or "tagged" (the slowest whose
    ``tag`` is ``flow_tag``, not 0); ``tag`` is this subscriber's tag.
    ``min_receivers`` (reliable publisher, 0..1024, default 0) holds
    publishes until that many subscribers are heard from, so that they get
    every message from the first.
    ``batch`` (default True) packs small messages published while earlier
    datagrams are in flight into one datagram; False sends each in its
    own, for subscribers of an rdmamsg without batches.  ``poll_us``
    (microseconds, 0..100000; default 30, or RDMAMSG_GROUP_POLL_US from
    the environment): a subscriber that received within that long of its
    previous receive keeps the context polling (yielding the CPU) that
    much longer before the loop blocks on its fd, so a stream's datagrams
    do not each wake the process; 0 blocks at once.

    Losses: every gap the library reports counts in ``Group.lost`` (its
    messages) and ``Group.gaps``, goes to ``on_loss(GroupLoss)`` (called
    in the context's pass) when given, and with ``loss_items=True`` is
    also queued, in order, as a ``GroupLoss`` item that ``recv()`` and
    ``async for`` yield before the message after the gap.  ``max_queue``
    bounds the messages waiting for ``recv()`` (default: no bound); a
    message arriving at a full queue is dropped and reported lost.

    Raises InvalidArgument for an address that is not a multicast address
    and attributes out of range, TypeError/ValueError for arguments of the
    wrong type or sign, and the join's error (NoDevice ...) when it fails.
    """
    if ctx is None:
        ctx = get_context()
    _check_own(ctx)
    if not isinstance(addr, str):
        raise TypeError("addr must be a str (a multicast address)")
    if not isinstance(role, str) or role not in _ROLES:
        raise ValueError("role must be one of %s" % sorted(_ROLES))
    if not isinstance(flow, str) or flow not in _FLOWS:
        raise ValueError("flow must be one of %s" % sorted(_FLOWS))
    if on_loss is not None and not callable(on_loss):
        raise TypeError("on_loss must be callable")
    if max_queue is not None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int):
            raise TypeError("max_queue must be an int")
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
    c = ctx._c()
    attrp = ffi.new("struct rdmamsg_group_attr **")
    check(lib.rdmamsg_group_attr_new(attrp), "rdmamsg_group_attr_new")
    core = _GroupCore(ctx, _ROLES[role], bool(loss_items), on_loss,
                      max_queue)
    try:
        _group_attr(attrp, role, max_msg_size, bind_addr, recv_depth,
                    send_depth, heartbeat, reliable, flow, flow_tag, tag,
                    min_receivers, batch, poll_us)
        gp = ffi.new("struct rdmamsg_group **")
        check(lib.rdmamsg_group_join(c, _cstr(addr, "addr"), attrp[0],
                                     _group_cbs, core.handle, gp),
              "rdmamsg_group_join")
    finally:
        lib.rdmamsg_group_attr_delete(attrp)
    core.g = gp[0]
    ctx._groups.add(core)
    idp = ffi.new("uint64_t *")
    if lib.rdmamsg_group_get_id(core.g, idp) == 0:
        core.id = int(idp[0])
    ctx._kick()
    group = Group(core, addr)
    fut = core.join_fut
    try:
        if fut is not None:
            await asyncio.shield(fut)
    except BaseException:
        # cancelled, or the join failed: nothing of it stays (and nobody
        # is left to take the join's outcome)
        core.join_fut = None
        if fut is not None and not fut.done():
            fut.cancel()
        core.close_nowait(user=True)
        raise
    return group


class Group:
    """A joined multicast group (``await rdmamsg.join(addr)`` or ``await
    ctx.join(addr)``): a publisher, a subscriber, or both.

    ``await g.publish(data)`` returns when the message is sent (each
    message is a datagram or fragments of at most one path MTU), waiting
    for room in the send queue or reliable mode's window first
    (back-pressure, no unbounded queue); ``publish_nowait()`` raises
    BlockingIOError instead.  ``await g.recv()`` and ``async for m in g``
    give ``GroupMessage(publisher, seq, data)`` in publish order per
    publisher (and ``GroupLoss`` items with ``loss_items=True``).  Delivery
    is unreliable but honest: per publisher, received + lost == published
    (``g.received``, ``g.lost``); reliable mode repairs losses.  Close
    with ``await g.close()`` (``aclose()``) or ``async with``; a group
    collected open is closed with a ResourceWarning."""

    def __init__(self, core: _GroupCore, addr: str) -> None:
        self._core = core
        self._addr = addr

    # -- state ----------------------------------------------------------
    @property
    def context(self) -> Context:
        return self._core.ctx

    @property
    def address(self) -> str:
        """The group's multicast address, as given to join()."""
        return self._addr

    @property
    def closed(self) -> bool:
        return self._core.closing or self._core.g is None

    @property
    def id(self) -> int:
        """This member's publisher id (random, non-zero): what its
        subscribers see in GroupMessage.publisher and GroupLoss."""
        return self._core.id

    @property
    def received(self) -> int:
        """Messages received (queued for recv() or given to the
        receiver)."""
        return self._core.received

    @property
    def lost(self) -> int:
        """Messages reported lost (by the library, or dropped at a full
        queue: see ``dropped``)."""
        return self._core.lost

    @property
    def gaps(self) -> int:
        """Loss reports of the library."""
        return self._core.gaps

    @property
    def dropped(self) -> int:
        """Messages dropped (and counted lost) because the queue was at
        ``max_queue``."""
        return self._core.dropped

    @property
    def publish_errors(self) -> int:
        """Publishes that failed after they were accepted (with
        publish_nowait() nobody else hears of it)."""
        return self._core.publish_errors

    @property
    def queued(self) -> int:
        """Items waiting for recv()."""
        return len(self._core.queue)

    def _c(self) -> Any:
        core = self._core
        if core.closing or core.g is None:
            raise make_error(-_errno.EPIPE, "the group is closed")
        return core.g

    def query(self) -> GroupStats:
        """The group's counters now (rdmamsg_group_query); once the group
        is closed, its last ones."""
        core = self._core
        if core.g is None:
            if core.final_stats is None:
                raise make_error(-_errno.EPIPE, "the group is closed")
            return core.final_stats
        st = ffi.new("struct rdmamsg_group_stats *")
        check(lib.rdmamsg_group_query(core.g, st), "rdmamsg_group_query")
        return _group_stats(st)

    # -- publishing -----------------------------------------------------
    def _publish(self, data: BufferLike, opid: int) -> int:
        if _running_loop() is not self._core.loop:
            _check_own(self._core.ctx)
        g = self._c()
        p, n = _buf_ptr(data)
        return lib.rdmamsg_group_publish(g, p, n, ffi.cast("void *", opid))

    async def publish(self, data: BufferLike) -> None:
        """Publish ``data`` (any bytes-like object; the library copies it)
        as this member's next message and wait until it is sent.  While
        the send queue (or reliable mode's window) is full it waits for
        room.  Raises MessageTooLarge above max_msg_size, AccessDenied
        (PermissionError) on a subscriber-only group, BrokenPipe once the
        group is closed, OperationCanceled when the group closed before
        an accepted message went out.  Cancelling the await does not
        unpublish an accepted message."""
        core = self._core
        opid = next(_op_ids)
        while True:
            rc = self._publish(data, opid)
            if rc != _EAGAIN:
                break
            await self._wait_room()
        check(rc, "publish")
        fut = _Waiter(core.ctx)
        _ops[opid] = (fut, None)
        core.ctx._kick()
        await fut

    def publish_nowait(self, data: BufferLike) -> None:
        """Publish without waiting for the completion; raises
        BlockingIOError (rdmamsg.WouldBlock) when there is no room now:
        then ``await g.wait_writable()``.  A failure after the message was
        accepted only counts in ``publish_errors``."""
        check(self._publish(data, 0), "publish")
        self._core.ctx._kick()

    async def _wait_room(self) -> None:
        core = self._core
        fut = _Waiter(core.ctx)
        core.writers.append(fut)
        core.ctx._group_waiting.add(core)
        try:
            await fut
        except BaseException:
            fut.cancel()
            try:
                core.writers.remove(fut)
            except ValueError:
                pass
            raise

    async def wait_writable(self) -> None:
        """Wait for the next chance that a publish refused with
        BlockingIOError succeeds (a completion, or the context's next
        pass)."""
        _check_own(self._core.ctx)
        self._c()
        await self._wait_room()

    # -- receiving ------------------------------------------------------
    def _recv_check(self) -> None:
        core = self._core
        if core.user_closed or core.g is None or core.dead is not None:
            raise core.end_error()
        if not core.role & lib.RDMAMSG_GROUP_SUBSCRIBER:
            raise make_error(-_errno.EPERM, "recv on a publisher-only group")
        if core.receiver is not None:
            raise RuntimeError("messages go to the receiver callback "
                               "(set_receiver)")

    async def recv(self) -> Union[GroupMessage, GroupLoss]:
        """The next ``GroupMessage`` (or ``GroupLoss``, with
        ``loss_items=True``).  Raises OperationCanceled once the group is
        closed, AccessDenied on a publisher-only group."""
        core = self._core
        if _running_loop() is not core.loop:
            _check_own(core.ctx)
        q = core.queue
        while not q:
            self._recv_check()
            fut = _Waiter(core.ctx)
            core.recv_waiters.append(fut)
            try:
                await fut
            except BaseException:
                fut.cancel()
                try:
                    core.recv_waiters.remove(fut)
                except ValueError:
                    pass
                if q:  # pass a wake-up it took on
                    _wake_one(core.recv_waiters)
                raise
        return q.popleft()

    def __aiter__(self) -> AsyncIterator[Union[GroupMessage, GroupLoss]]:
        return self

    async def __anext__(self) -> Union[GroupMessage, GroupLoss]:
        """recv(), ending (StopAsyncIteration) once the group is closed."""
        try:
            return await self.recv()
        except OperationCanceled:
            raise StopAsyncIteration from None

    def set_receiver(self, callback: Optional[Callable[[GroupMessage],
                                                        Any]]) -> None:
        """Give every message to ``callback(msg)`` inside the context's
        pass (no queue, no task step); None goes back to the queue.  It
        must not block; its exceptions go to the loop's exception
        handler.  Messages already queued stay for recv()."""
        if callback is not None and not callable(callback):
            raise TypeError("the receiver must be callable or None")
        self._core.receiver = callback
        if callback is not None:
            _wake_all(self._core.recv_waiters)  # recv() now raises

    # -- closing ----------------------------------------------------------
    def close_nowait(self) -> None:
        """Start leaving the group (see close())."""
        _check_own(self._core.ctx)
        self._core.close_nowait(user=True)

    async def close(self) -> None:
        """Leave the group: no new publishes, queued messages are dropped,
        pending recv()s raise OperationCanceled (``async for`` ends),
        publishes already accepted complete (sent, or OperationCanceled);
        returns once the library freed the group.  Closing again is a
        no-op."""
        _check_own(self._core.ctx)
        self._core.close_nowait(user=True)
        await asyncio.shield(self._core.closed_fut)

    aclose = close

    async def wait_closed(self) -> None:
        """Wait until the group is closed and freed."""
        await asyncio.shield(self._core.closed_fut)

    async def __aenter__(self) -> "Group":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.user_closed:
            return
        core.user_closed = True
        if core.g is None:
            return
        warnings.warn("unclosed rdmamsg group %r" % self, ResourceWarning,
                      source=self)
        if not core.loop.is_closed():
            _close_later(core.ctx, core.close_nowait, True)

    def __repr__(self) -> str:
        c = self._core
        role = {v: k for k, v in _ROLES.items()}.get(c.role, "?")
        st = "closed" if c.g is None else "closing" if c.closing else "open"
        return "<rdmamsg.Group %s %s %s>" % (self._addr, role, st)
