"""Build the Cython engine (sievesim._core). Metadata lives in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def _extension(name: str, *, numpy_api: bool = True, extra_args: tuple[str, ...] = ()) -> Extension:
    """A Cython extension ``name`` built from its ``.pyx`` at -O3 (numpy headers where it cimports numpy)."""
    numpy_args = dict(include_dirs=[numpy.get_include()],
                      define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]) if numpy_api else {}
    return Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O3", *extra_args], **numpy_args)


extensions = [
    _extension("sievesim._core._engine"),
    _extension("sievesim._core._traceparse"),
    _extension("sievesim._core._prefetch", numpy_api=False),
    _extension("sievesim.policies._sieve_kernel", numpy_api=False),
    # the grouped router's expert draw, bit for bit the numpy expressions: no fused multiply-add
    _extension("sievesim.workload._grouped_draw", extra_args=("-ffp-contract=off",)),
    # the list scheduler, bit for bit the Python reference's floats: no fused multiply-add
    _extension("sievesim.system._dag_core", numpy_api=False, extra_args=("-ffp-contract=off",)),
    _extension("sievesim.system._graph_add", numpy_api=False),
    _extension("sievesim.system._expert_rows"),
    _extension("sievesim.system._slots"),
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
