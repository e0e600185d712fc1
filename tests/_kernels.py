"""The two decoding paths the reader tests run on, and an honest skip where the compiled one cannot run.

`tbtriage.load(..., kernel="jit")` quietly takes the pure path when numba is missing or broken (the right thing
for a user), so a test that claims to exercise the compiled kernel must check that it really can.
"""

from __future__ import annotations

import pytest

from tbtriage.analysis import decode


def compiled_kernel_problem() -> str | None:
    """Why the numba kernel cannot run in this environment, or None when it can."""
    if not decode.numba_available():
        return "numba is not installed"
    if decode.jit_module() is None:
        return "numba is installed but failed to load the kernel"
    return None


_PROBLEM = compiled_kernel_problem()

#: For tests whose point is the compiled kernel: skipped, saying why, instead of passing on the pure path.
needs_compiled_kernel = pytest.mark.skipif(
    _PROBLEM is not None,
    reason=f"compiled kernel unavailable ({_PROBLEM}): a 'jit' read would silently take the pure path",
)

#: Parametrize a reader test over both paths.
KERNELS = ["pure", pytest.param("jit", marks=needs_compiled_kernel)]
