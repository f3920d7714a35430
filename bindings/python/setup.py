"""setup.py -- the rdmamsg Python package (cffi, API mode).

    pip install --no-build-isolation ./bindings/python

builds against the library found by pkg-config (or RDMAMSG_INCLUDE_DIR /
RDMAMSG_LIB_DIR, see rdmamsg_build.py).
"""
from setuptools import setup

setup(
    name="rdmamsg",
    version="0.1.0",
    description="asyncio messaging over RDMA (and softrdma) with rdmamsg",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=["rdmamsg"],
    package_data={"rdmamsg": ["py.typed"]},
    python_requires=">=3.8",
    setup_requires=["cffi>=1.12"],
    install_requires=["cffi>=1.12"],
    cffi_modules=["rdmamsg_build.py:ffibuilder"],
    zip_safe=False,
)
