"""Child-side confinement for the Linux tool sandbox: the fresh child applies it to itself.

The parent passes one tier of the pinned policy (``sandbox_profiles/linux-tool-worker.json``),
with its paths resolved, on the child's command line. The child (``harness/tools/worker.py``)
loads this module by file path and calls :func:`apply` before it reads stdin, so nothing the
tool sees on stdin runs before the walls are up, and no ``preexec_fn`` (which forces ``fork()``
of the whole parent) is needed.

Steps, in this order (each later step may forbid an earlier one):

1. tie the child to its parent (``PR_SET_PDEATHSIG`` SIGKILL, then check that the parent it
   was started by is still its parent, so a parent that died first is not missed);
2. ``unshare`` the user, network, mount, IPC, UTS and pid namespaces (tier ``userns``); a root
   child first gives up its real uid (kept: the effective uid, so file access is unchanged)
   so that ``RLIMIT_NPROC``, counted per real user inside the new user namespace, binds it;
   with a new pid namespace the process forks once: the copy is pid 1 of that namespace and
   goes on below, tied to the original, which only waits for it and passes on how it ended;
3. remount ``/`` read-only, recursively (``mount_setattr``; needs the new mount namespace);
4. stop core dumps and ``/proc`` access by the same uid (``PR_SET_DUMPABLE`` 0);
5. drop every capability (bounding set when permitted, ambient, effective/permitted/inheritable);
6. ``PR_SET_NO_NEW_PRIVS``;
7. resource limits, soft = hard: address space, file size, CPU time, open files, no core, and
   tasks (threads and processes) where the call has a user namespace of its own;
8. Landlock: every filesystem right of the running ABI handled, reads only on an allowlist,
   writes only to ``/dev/null``, TCP bind/connect handled with no rule, and the abstract Unix
   socket and signal scopes; on an ABI without scopes each one asked for must be closed by the
   seccomp filter (the parent says which are), or the tier is refused;
9. a seccomp filter (compiled once by the parent with libseccomp, loaded here as BPF bytes with
   the child's own pid patched in) answering EPERM for socket creation, process creation,
   ptrace and cross-process memory, io_uring, bpf, keys, namespaces, the mount family,
   mode/owner/time/xattr changes, SysV/POSIX IPC objects and memfds, anything that acts on
   another process (its limits, priority, scheduling, I/O priority, pages, an fd's signal
   owner); ``clone3`` answers ENOSYS so libc falls back to ``clone``, where only new threads
   are allowed; signals only to itself.

Then :func:`apply` checks from the inside that the state it asked for is the state it has.

Standard library only (``ctypes``): this runs in ``python -I -S``, where no third-party package
is importable, and it must not import the parent-side ``harness.sandbox`` package. It does not
choose a tier, read files of its own, or judge whether the walls hold: the parent's denial
probes do that by ground truth.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

# ``typing`` costs milliseconds to import, on every call: only the type checker sees it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ConfineError",
    "apply",
    "compile_seccomp",
    "landlock_abi",
    "missing_scopes",
    "patch_pid",
    "confine_child",
    "prepare_seccomp",
]

# Linux UAPI constants (include/uapi/linux/{sched,mount,prctl,capability,landlock}.h).
_CLONE_FLAGS = {
    "mount": 0x00020000,
    "uts": 0x04000000,
    "ipc": 0x08000000,
    "user": 0x10000000,
    "net": 0x40000000,
    "pid": 0x20000000,
}
_CLONE_THREAD = 0x00010000
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_GET_SECCOMP = 21
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_SETPCAP = 8
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SECCOMP_MODE_FILTER = 2

# Syscall numbers from the unified table (>= 424): the same on x86_64 and aarch64.
_NR_MOUNT_SETATTR = 442
_NR_LANDLOCK_CREATE_RULESET = 444
_NR_LANDLOCK_ADD_RULE = 445
_NR_LANDLOCK_RESTRICT_SELF = 446

_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
# Filesystem rights by the ABI that introduced them.
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_FS_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPES = {"abstract_unix_socket": 1 << 0, "signal": 1 << 1}  # ABI 6

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000
_NR_SCMP_ERROR = -1
_SCMP_CMP_NE = 1
_SCMP_CMP_MASKED_EQ = 7
_LOW_32 = 0xFFFFFFFF
_BPF_INSN = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k
_BPF_INSN_SIZE = _BPF_INSN.size
_AF_INET = 2
_SOCK_DGRAM = 2
# The real uid a root child takes in a user namespace of its own: one no account holds, so
# that RLIMIT_NPROC binds and no other process's credentials match it.
_TASKS_UID = 0x7FFF_FFF0
# Exit status of a child whose parent died before it was tied to it: nobody reads it.
_EXIT_ORPHANED = 118


class ConfineError(Exception):
    """A confinement step failed; the message names the step and the errno."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    """The C library with the signatures used here (loaded once per process image)."""
    if _LIBC:
        return _LIBC[0]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = (
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    )
    _LIBC.append(libc)
    return libc


def _fail(step: str) -> ConfineError:
    err = ctypes.get_errno()
    name = errno.errorcode.get(err, str(err))
    return ConfineError(f"{step} failed: {name} ({os.strerror(err)})")


def landlock_abi(libc: ctypes.CDLL | None = None) -> int:
    """Return the running kernel's Landlock ABI version, or 0 where Landlock is unavailable."""
    lib = libc if libc is not None else _libc()
    abi = lib.syscall(
        ctypes.c_long(_NR_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(abi), 0)


def _unshare(libc: ctypes.CDLL, names: list[str]) -> None:
    flags = 0
    for name in names:
        flags |= _CLONE_FLAGS[name]
    if libc.unshare(ctypes.c_int(flags)) != 0:
        raise _fail(f"unshare({','.join(names)})")


def _readonly_root(libc: ctypes.CDLL) -> None:
    attr = _MountAttr(
        # Not NODEV: /dev/null must stay usable; not NOEXEC: extension modules are mmapped.
        attr_set=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID,
        attr_clr=0,
        propagation=0,
        userns_fd=0,
    )
    rc = libc.syscall(
        ctypes.c_long(_NR_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        b"/",
        ctypes.c_uint(_AT_RECURSIVE),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    if rc != 0:
        raise _fail("read-only remount of / (mount_setattr)")


def _capget(libc: ctypes.CDLL) -> tuple[int, int, int]:
    header = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise _fail("capget")
    eff = data[0].effective | (data[1].effective << 32)
    prm = data[0].permitted | (data[1].permitted << 32)
    inh = data[0].inheritable | (data[1].inheritable << 32)
    return eff, prm, inh


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    effective, _, _ = _capget(libc)
    if effective & (1 << _CAP_SETPCAP):
        # The bounding set can only shrink with CAP_SETPCAP; without it (an unprivileged
        # child) it is moot, since no_new_privs stops any exec from gaining capabilities.
        for cap in range(64):
            if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                if ctypes.get_errno() == errno.EINVAL:
                    break  # past the kernel's last capability
                raise _fail(f"dropping capability {cap} from the bounding set")
    if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        raise _fail("clearing ambient capabilities")
    header = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("capset to the empty set")


def _handled_fs(abi: int) -> int:
    rights = _FS_ABI1_ALL
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def missing_scopes(abi: int, spec: dict[str, Any]) -> list[str]:
    """Scopes the policy asks for that neither Landlock ``abi`` nor the seccomp filter gives.

    Landlock has scopes from ABI 6; below it each scope must be closed by the seccomp filter
    (``spec["closed_by_seccomp"]``, worked out by the parent from the filter's rules).
    """
    if abi >= 6:
        return []
    return [name for name in spec["scopes"] if name not in spec["closed_by_seccomp"]]


def _landlock(libc: ctypes.CDLL, spec: dict[str, Any]) -> int:
    abi = landlock_abi(libc)
    if abi == 0:
        raise _fail("Landlock (landlock_create_ruleset)")
    min_abi = int(spec["min_abi"])
    if abi < min_abi:
        raise ConfineError(f"Landlock ABI {abi} is older than the policy's minimum {min_abi}")
    handled_fs = _handled_fs(abi)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if spec["deny_tcp"] and abi >= 4 else 0
    if spec["deny_tcp"] and abi < 4:
        raise ConfineError(f"Landlock ABI {abi} cannot deny TCP (needs ABI 4)")
    missing = missing_scopes(abi, spec)
    if missing:
        raise ConfineError(
            f"Landlock ABI {abi} has no {' or '.join(missing)} scope and the seccomp filter "
            "does not close the hole"
        )
    scoped = 0
    if abi >= 6:
        for name in spec["scopes"]:
            scoped |= _SCOPES[name]
    attr = _RulesetAttr(handled_access_fs=handled_fs, handled_access_net=handled_net, scoped=scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = libc.syscall(
        ctypes.c_long(_NR_LANDLOCK_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        read = _FS_READ_FILE | _FS_READ_DIR
        write = _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        for path in spec["read"]:
            _landlock_rule(libc, ruleset, path, read & handled_fs)
        for path in spec["read_write"]:
            _landlock_rule(libc, ruleset, path, (read | write) & handled_fs)
        if libc.syscall(
            ctypes.c_long(_NR_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)
        ):
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _landlock_rule(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # an allowlisted path this system does not have grants nothing
    except OSError as e:
        raise ConfineError(f"opening Landlock allowlist path {path!r} failed: {e}") from e
    try:
        is_dir = (os.fstat(fd).st_mode & 0o170000) == 0o040000
        attr = _PathBeneathAttr(
            allowed_access=access if is_dir else access & _FS_FILE_ONLY, parent_fd=fd
        )
        if libc.syscall(
            ctypes.c_long(_NR_LANDLOCK_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        ):
            raise _fail(f"landlock_add_rule for {path!r}")
    finally:
        os.close(fd)


def _libseccomp() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as e:
        raise ConfineError(f"seccomp needs libseccomp.so.2, which cannot be loaded: {e}") from e
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib


def compile_seccomp(spec: dict[str, Any], *, pid: int) -> bytes:  # noqa: C901 - one straight-line BPF program, each rule emitted in filter order
    """Compile the policy's seccomp rules to a classic BPF program (``struct sock_filter[]``).

    Runs in the parent, once per backend: the child then loads the bytes with one ``prctl``
    instead of loading libseccomp and building ~80 rules on every call. The only per-child
    value, its own pid (signals may go only to itself), is compiled in as ``pid`` and patched
    by the child (see :func:`patch_pid`).

    Raises:
        ConfineError: when libseccomp is missing, a syscall name is unknown, or a rule fails.
    """
    lib = _libseccomp()
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise ConfineError("seccomp_init failed")
    unified: dict[str, int] = spec["unified_numbers"]

    def resolve(name: str) -> int | None:
        nr = int(lib.seccomp_syscall_resolve_name(name.encode("ascii")))
        if nr == _NR_SCMP_ERROR:
            if name in unified:
                return unified[name]  # newer than this libseccomp: use the unified number
            raise ConfineError(f"seccomp cannot resolve syscall {name!r}")
        if nr < 0:
            return None  # a pseudo-syscall: this architecture has no such call
        return nr

    def add(action: int, name: str, cmps: list[_ArgCmp]) -> None:
        nr = resolve(name)
        if nr is None:
            return
        array = (_ArgCmp * max(len(cmps), 1))(*cmps)
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
        if rc != 0:
            raise ConfineError(f"seccomp rule for {name!r} failed: {os.strerror(-rc)}")

    eperm = _SCMP_ACT_ERRNO | errno.EPERM
    try:
        for name in spec["deny"]:
            add(eperm, name, [])
        for name in spec["enosys"]:
            add(_SCMP_ACT_ERRNO | errno.ENOSYS, name, [])
        if spec["deny_process_clone"]:
            # New threads (CLONE_THREAD) stay allowed; a new process does not.
            add(eperm, "clone", [_ArgCmp(0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0)])
        for name in spec["signal_only_self"]:
            add(eperm, name, [_ArgCmp(0, _SCMP_CMP_NE, pid, 0)])
        for name, index in sorted(spec["self_only"].items()):
            # pid 0 is the caller; any other value (whatever its upper bits) is another task.
            add(eperm, name, [_ArgCmp(index, _SCMP_CMP_NE, 0, 0)])
        for name, commands in sorted(spec["deny_commands"].items()):
            # The kernel reads the command as a 32-bit int: compare the low 32 bits only.
            for command in commands:
                add(eperm, name, [_ArgCmp(1, _SCMP_CMP_MASKED_EQ, _LOW_32, command)])
        # A BPF program is at most 4096 instructions (32 KiB): it fits a pipe's buffer whole.
        read_fd, write_fd = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_fd)
            os.close(write_fd)
            write_fd = -1
            if rc != 0:
                raise ConfineError(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    finally:
        lib.seccomp_release(ctx)
    program = b"".join(chunks)
    if not program or len(program) % _BPF_INSN_SIZE:
        raise ConfineError("seccomp_export_bpf produced no whole BPF program")
    return program


def patch_pid(program: bytes, sentinel: int, pid: int) -> bytes:
    """Replace the constant ``sentinel`` by ``pid`` in every BPF instruction that holds it."""
    out = bytearray(program)
    for offset in range(0, len(out), _BPF_INSN_SIZE):
        code, jt, jf, k = _BPF_INSN.unpack_from(out, offset)
        if k == sentinel:
            _BPF_INSN.pack_into(out, offset, code, jt, jf, pid)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


# The decoded program and the offsets of its pid stand-ins, by the hex the parent sent: a
# zygote works this out once, before it forks, and every child only patches the offsets.
_PROGRAMS: dict[tuple[str, int], tuple[bytes, tuple[int, ...]]] = {}


def prepare_seccomp(spec: dict[str, Any]) -> tuple[bytes, tuple[int, ...]]:
    """Decode the program and find the instructions holding the pid stand-in (cached)."""
    key = (spec["bpf"], int(spec["pid_sentinel"]))
    cached = _PROGRAMS.get(key)
    if cached is None:
        program = bytes.fromhex(key[0])
        offsets = tuple(
            offset
            for offset in range(0, len(program), _BPF_INSN_SIZE)
            if _BPF_INSN.unpack_from(program, offset)[3] == key[1]
        )
        cached = _PROGRAMS[key] = (program, offsets)
    return cached


def _seccomp(libc: ctypes.CDLL, spec: dict[str, Any]) -> None:
    template, offsets = prepare_seccomp(spec)
    patched = bytearray(template)
    pid = os.getpid()
    for offset in offsets:
        code, jt, jf, _ = _BPF_INSN.unpack_from(patched, offset)
        _BPF_INSN.pack_into(patched, offset, code, jt, jf, pid)
    program = bytes(patched)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len=len(program) // _BPF_INSN_SIZE, filter=ctypes.addressof(buffer))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise _fail("loading the seccomp filter (PR_SET_SECCOMP)")


def _self_check(libc: ctypes.CDLL, policy: dict[str, Any]) -> None:
    """Check from the inside that the asked-for state holds (cheap; not a substitute for probes)."""
    if policy["no_new_privs"] and libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1:
        raise ConfineError("self-check: no_new_privs is not set")
    if policy["drop_capabilities"] and any(_capget(libc)):
        raise ConfineError("self-check: capabilities remain after dropping them")
    seccomp = policy["seccomp"]
    if seccomp is not None:
        if libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) != _SECCOMP_MODE_FILTER:
            raise ConfineError("self-check: no seccomp filter is in force")
        if seccomp["denies_socket"]:
            fd = libc.socket(_AF_INET, _SOCK_DGRAM, 0)
            if fd >= 0:
                os.close(fd)
                raise ConfineError("self-check: a socket could still be created")
    if policy["landlock"] is not None:
        try:
            fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except PermissionError:
            pass
        else:
            os.close(fd)
            raise ConfineError("self-check: Landlock still lets / be listed")


def _tie_to_parent(libc: ctypes.CDLL, parent: int) -> None:
    """Die with SIGKILL when the parent dies, and at once if it already has."""
    if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
        raise _fail("PR_SET_PDEATHSIG")
    if os.getppid() != parent:
        os._exit(_EXIT_ORPHANED)


def _pid_namespace_init(libc: ctypes.CDLL, report_fd: int | None = None) -> None:
    """Fork into the new pid namespace: the copy (pid 1) returns, the original relays its end.

    The original never returns: it waits for the copy and ends the same way (exit status or
    signal), so the parent sees one child. The copy dies with the original (PDEATHSIG, checked
    through a pipe only the original holds open), and everything in the namespace dies with
    the copy.
    """
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        if libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:
            raise _fail("PR_SET_PDEATHSIG in the pid namespace")
        os.set_blocking(alive_r, False)
        try:
            if os.read(alive_r, 1) == b"":
                os._exit(_EXIT_ORPHANED)  # the original is gone already
        except BlockingIOError:
            pass
        os.close(alive_r)
        return
    os.close(alive_r)
    os.close(0)
    os.close(1)
    _, status, usage = os.wait4(pid, 0)
    if report_fd is not None:
        # How the call ended, said before this process's own exit tears the namespaces down.
        code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        import contextlib  # only a zygote's children report, and their zygote imported it

        with contextlib.suppress(OSError):  # nobody listens: the exit itself tells
            os.write(report_fd, f"{code} {cpu!r} {usage.ru_maxrss}".encode("ascii"))
    if os.WIFSIGNALED(status):
        import resource
        import signal

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def _task_cgroup(spec: dict[str, Any]) -> None:
    """Make this call's own cgroup in the backend's directory, cap it, move into it, check.

    For a tier without a user namespace of its own (``RLIMIT_NPROC`` cannot count one call
    there). Done before Landlock, which leaves nothing under ``/sys`` writable.
    """
    pid = str(os.getpid())
    own = os.path.join(spec["path"], pid)
    try:
        try:  # noqa: SIM105 - contextlib is not imported in the child, for its start-up time
            os.mkdir(own, 0o755)
        except FileExistsError:
            pass  # left by an earlier child of the same pid, reaped without its cleanup
        for name, value in (("pids.max", str(spec["max"])), ("cgroup.procs", pid)):
            fd = os.open(os.path.join(own, name), os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, value.encode())
            finally:
                os.close(fd)
        with open(os.path.join(own, "pids.max")) as f:
            cap = f.read().strip()
        with open(os.path.join(own, "cgroup.procs")) as f:
            members = f.read().split()
    except OSError as e:
        raise ConfineError(f"joining the call's task cgroup {own} failed: {e}") from e
    if cap != str(spec["max"]) or pid not in members:
        raise ConfineError(f"self-check: not in the call's task cgroup {own} capped at {cap}")


def _rlimits(spec: dict[str, Any]) -> list[tuple[int, tuple[int, int]]]:
    """Set the per-call limits (never above a hard limit already in force); return them."""
    import resource

    cpu = int(spec["cpu_seconds"])
    wanted = [
        (resource.RLIMIT_AS, spec["address_space_bytes"], 0),
        (resource.RLIMIT_FSIZE, spec["file_size_bytes"], 0),
        (resource.RLIMIT_NOFILE, spec["open_files"], 0),
        (resource.RLIMIT_CORE, 0, 0),
        # SIGXCPU at the soft limit; a child that ignores it gets SIGKILL a second later.
        (resource.RLIMIT_CPU, cpu, 1),
    ]
    if spec["tasks"] is not None:
        wanted.append((resource.RLIMIT_NPROC, spec["tasks"], 0))
    applied: list[tuple[int, tuple[int, int]]] = []
    for which, value, grace in wanted:
        _, hard = resource.getrlimit(which)
        limits = (value, value + grace)
        if hard != resource.RLIM_INFINITY:
            limits = (min(value, hard), min(value + grace, hard))
        try:
            resource.setrlimit(which, limits)
        except (OSError, ValueError) as e:
            raise ConfineError(f"setting resource limit {which} to {limits} failed: {e}") from e
        applied.append((which, limits))
    return applied


def _check_rlimits(applied: list[tuple[int, tuple[int, int]]]) -> None:
    import resource

    for which, limits in applied:
        if resource.getrlimit(which) != limits:
            raise ConfineError(f"self-check: resource limit {which} is not {limits}")


def confine_child(policy: dict[str, Any]) -> None:
    """Do once, in a zygote before it forks, what every child's :func:`apply` would redo."""
    _libc()
    if policy["seccomp"] is not None:
        prepare_seccomp(policy["seccomp"])
    import resource  # noqa: F401 - imported here once, used by every child's limits
    import signal  # noqa: F401 - used by the pid namespace's relay


def apply(
    policy: dict[str, Any], *, parent: int | None = None, report_fd: int | None = None
) -> dict[str, Any]:
    """Confine the calling process as ``policy`` (one resolved tier) says.

    Args:
        policy: the tier as the parent instantiated it: ``tier``, ``unshare``, ``readonly_root``,
            ``not_dumpable``, ``drop_capabilities``, ``no_new_privs``, ``limits``, ``landlock``
            (spec or None), ``seccomp`` (None, or ``bpf`` hex, ``pid_sentinel``,
            ``denies_socket``).
        parent: the pid of the process that started this one: the child dies with it (and
            exits at once when its parent is already another process).
        report_fd: with a pid namespace, where the waiting original writes how the call's
            pid 1 ended (``"<exit code> <cpu seconds> <max rss KiB>"``) before it exits itself.

    Returns:
        What was applied: the tier name and the Landlock ABI in force (0 when not used).

    Raises:
        ConfineError: when any step fails or the self-check finds a step did not take; the
            process must then not run the tool.
    """
    libc = _libc()
    if parent is not None:
        _tie_to_parent(libc, parent)
    namespaces = list(policy["unshare"])
    limits = policy["limits"]
    if namespaces:
        if "user" in namespaces and limits["tasks"] is not None and os.getuid() == 0:
            # RLIMIT_NPROC never binds the real uid 0; the effective uid stays 0, so what the
            # child may open is unchanged (and Landlock decides that anyway).
            try:
                os.setresuid(_TASKS_UID, -1, -1)
            except OSError as e:
                raise ConfineError(f"giving up the real uid 0 failed: {e}") from e
        _unshare(libc, namespaces)
        if "pid" in namespaces:
            _pid_namespace_init(libc, report_fd)
    if limits.get("task_cgroup") is not None:
        _task_cgroup(limits["task_cgroup"])
    if policy["readonly_root"]:
        _readonly_root(libc)
    if policy["not_dumpable"] and libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise _fail("PR_SET_DUMPABLE")
    if policy["drop_capabilities"]:
        _drop_capabilities(libc)
    if policy["no_new_privs"] and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("PR_SET_NO_NEW_PRIVS")
    applied = _rlimits(limits)
    abi = 0
    if policy["landlock"] is not None:
        abi = _landlock(libc, policy["landlock"])
    if policy["seccomp"] is not None:
        _seccomp(libc, policy["seccomp"])
    _self_check(libc, policy)
    _check_rlimits(applied)
    return {"tier": policy["tier"], "landlock_abi": abi}
