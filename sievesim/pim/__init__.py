"""PIM on the engine: command programs for GEMVs, experts and attention, and their costs."""
from .engine import PIMResult, geometry_for, pim_config, run_programs
from .program import GemvPlan, PIMGeometry, gemv_program, plan_gemv
from .roofline import roofline_overestimate

__all__ = ["PIMResult", "geometry_for", "pim_config", "run_programs", "GemvPlan", "PIMGeometry",
           "gemv_program", "plan_gemv", "roofline_overestimate"]
