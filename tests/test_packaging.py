"""The compiled engine's sources travel with the package: every .pyx, .pxd and .pxi under sievesim/
matches a package-data pattern of pyproject.toml, so an sdist can rebuild the extensions."""
import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:                                   # pragma: no cover
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_cython_sources_are_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sievesim"]
    pkg = ROOT / "sievesim"
    sources = [p for ext in ("pyx", "pxd", "pxi") for p in pkg.rglob(f"*.{ext}")]
    assert any(p.suffix == ".pxi" for p in sources) and any(p.suffix == ".pxd" for p in sources)
    missing = [str(p.relative_to(pkg)) for p in sources
               if not any(p.relative_to(pkg).match(pat) or p.match(pat) for pat in patterns)]
    assert missing == []
