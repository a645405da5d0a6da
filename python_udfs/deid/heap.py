"""Give the C heap's free pages back to the operating system between a request's phases.

numpy's large arrays come from glibc's malloc; once a few of them have been freed, glibc keeps
later ones of up to 32 MB on its heap (its mmap threshold grows) and keeps the freed pages, so
a backend's resident memory stays at the high-water mark of the phase before: the method's
temporaries would still be resident while the write's COPYs touch shared buffers, and the
write's while the verifier runs. :func:`release` asks glibc to return every free page
(``malloc_trim(0)``: ~0.1 ms; the next phase faults in only what it uses). Without glibc
(no ``malloc_trim``) it does nothing. Pure Python (ctypes); no plpy, no data touched.
"""
import ctypes

try:
    _TRIM = ctypes.CDLL(None).malloc_trim
    _TRIM.argtypes, _TRIM.restype = [ctypes.c_size_t], ctypes.c_int
except (OSError, AttributeError):          # not glibc: nothing to ask
    _TRIM = None


def release():
    """Return the heap's free pages to the operating system (glibc); True if it could ask."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
