# drmas_ctypes.py — what the GPU scripts (gpu_lmhead.py, gpu_advantage.py) share to call libdrmas through
# ctypes: opening the library with the signatures every script needs, checking a config struct and the
# constants a script spells out against the library (drmas_abi_value), so that a script and a library
# built from another drmas.h refuse to run together, and the status check and pointer helpers.
import ctypes
import os
import sys


def open_library(path):
    """The library at path, with the signatures of its error, ABI and thread functions set."""
    lib = ctypes.CDLL(os.path.abspath(path))
    i32 = ctypes.c_int32
    lib.drmas_last_error.restype = ctypes.c_char_p
    lib.drmas_last_error.argtypes = []
    lib.drmas_abi_value.restype = ctypes.c_int64
    lib.drmas_abi_value.argtypes = [ctypes.c_char_p]
    lib.drmas_cuda_available.restype = i32
    lib.drmas_cuda_available.argtypes = []
    lib.drmas_set_num_threads.restype = i32
    lib.drmas_set_num_threads.argtypes = [i32]
    return lib


def check_abi(lib, path, who, struct_name, struct, constants):
    """Exits unless the library's size and field offsets of struct_name are struct's, and its constants these."""
    want = {struct_name: ctypes.sizeof(struct)}
    for name, _ in struct._fields_:
        want[struct_name + "." + name] = getattr(struct, name).offset
    want.update(constants)
    for k, v in want.items():
        got = lib.drmas_abi_value(k.encode())
        if got != v:
            sys.exit(f"{who}: {path} says {k} = {got}, this script {v} (built from another drmas.h?)")


def check(lib, st, what):
    if st != 0:
        raise RuntimeError(f"{what}: status {st}: {lib.drmas_last_error().decode()}")


def ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None
