"""DRAM standards as data, memory-system configurations, traces and the Python face of the engine."""
from .config import BUILTIN_CONFIGS, DRAMConfig, get_config
from .engine import DRAMResult, simulate, write_command_log
from .standards import STANDARDS, Standard, TimingConstraint, get_standard
from .traces import RequestTrace, read_loadstore_trace, read_readwrite_trace, read_trace

__all__ = [
    "BUILTIN_CONFIGS", "DRAMConfig", "get_config", "DRAMResult", "simulate", "write_command_log",
    "STANDARDS", "Standard", "TimingConstraint", "get_standard", "RequestTrace", "read_loadstore_trace",
    "read_readwrite_trace", "read_trace",
]
