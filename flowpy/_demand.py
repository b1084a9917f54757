"""Re-export of :mod:`flowpy._core.demand`, the home of the demand arithmetic.

Kept for the modules that import it by this name (the SubmissionPublisher
core and the test kit); new code imports :mod:`flowpy._core.demand`.
"""

from flowpy._core.demand import MAX_DEMAND, add_demand, check_request, replenish_limit

__all__ = ["MAX_DEMAND", "add_demand", "check_request", "replenish_limit"]
