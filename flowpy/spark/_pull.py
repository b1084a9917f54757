"""Re-export of :mod:`flowpy._core.pull`, the home of the pull-on-demand subscription.

Kept so that ``flowpy.spark`` modules may keep importing it by this name.
"""

from flowpy._core.pull import EMPTY, END, Pulled, PullSubscription

__all__ = ["EMPTY", "END", "PullSubscription", "Pulled"]
