"""perfcast: forecast the performance of ML workloads on hardware you do not own."""

__version__ = "0.1.0"
__all__ = ["__version__"]
