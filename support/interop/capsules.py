"""What a DLPack capsule says about itself: its name, and for a versioned one (DLPack 1.0 and later) its version
and flags, read from the C struct with :mod:`ctypes` (a capsule is opaque to Python code).

A producer returns the versioned capsule (``"dltensor_versioned"``) only when the consumer asks for it with
``__dlpack__(max_version=(1, 0))`` or later; its struct starts with the version and then, after two pointers,
64 bits of flags: ``READ_ONLY`` (bit 0: the consumer must not write) and ``IS_COPIED`` (bit 1: the producer
made a copy to honour the request, e.g. ``copy=True`` or a ``dl_device`` on the host).

>>> import numpy as np
>>> frozen = np.zeros(3)
>>> frozen.flags.writeable = False
>>> capsule_facts(frozen.__dlpack__(max_version=(1, 0)))
{'capsule': 'dltensor_versioned', 'version': '1.0', 'read only': True, 'copied': False}
"""

from __future__ import annotations

import ctypes

READ_ONLY, IS_COPIED = 1 << 0, 1 << 1


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _VersionedHead(ctypes.Structure):
    """The first fields of ``DLManagedTensorVersioned`` (dlpack.h): version, manager context, deleter, flags."""

    _fields_ = [
        ("version", _Version),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
    ]


def _capsule_api():
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api


def capsule_facts(capsule) -> dict[str, object]:
    """The capsule's name; for a versioned capsule also its DLPack version and its two flags.

    The capsule is only read: a consumer can still take it afterwards.
    """
    api = _capsule_api()
    name = api.PyCapsule_GetName(capsule).decode()
    facts: dict[str, object] = {"capsule": name}
    if name == "dltensor_versioned":
        head = _VersionedHead.from_address(api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"))
        facts |= {
            "version": f"{head.version.major}.{head.version.minor}",
            "read only": bool(head.flags & READ_ONLY),
            "copied": bool(head.flags & IS_COPIED),
        }
    return facts
